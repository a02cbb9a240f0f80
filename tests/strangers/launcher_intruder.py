# Run (after wire.py) by tests/tests/netns.rs as a second local user against a running job's
# launcher address and port (argv[1], argv[2]). It does what a stranger on the host can: read
# every process's command line (and any environment it may read), take every hex string found
# there as a candidate job key, and try to join as each host index with each candidate; then
# try frames without any hello and an oversized frame. It prints one line per outcome and
# "accepted N" last; exit 0.
import hashlib
import hmac
import os
import re
import socket
import struct
import sys

host, port = sys.argv[1], int(sys.argv[2])
tokens = set()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for part in ("cmdline", "environ"):
        try:
            data = open(f"/proc/{pid}/{part}", "rb").read()
        except OSError:
            continue
        tokens.update(re.findall(rb"[0-9a-f]{12,}", data))
print(f"tokens {len(tokens)}")


def close(s):
    if s is not None:
        s.close()


def keys_from(token):
    yield token
    if len(token) % 2 == 0:
        yield bytes.fromhex(token.decode())


accepted = 0
candidates = sorted(tokens)[:40] + [b""]
for token in candidates:
    for key in keys_from(token):
        for index in (0, 1):
            s = None
            try:
                s = socket.create_connection((host, port), timeout=5)
                challenge = read_frame(s)
                nonce = challenge[5:]
                proof = hmac.new(
                    key,
                    b"kestrel-launch-v1 daemon" + struct.pack(">I", index) + nonce,
                    hashlib.sha256,
                ).digest()
                # The old hello carried the key itself where the proof now goes.
                for p in (proof, key):
                    hello = (
                        bytes([1]) + struct.pack(">I", index) + blob(p) + blob(os.urandom(32))
                        + blob(b"stranger") + struct.pack(">I", 1)
                    )
                    s.sendall(frame(hello))
                reply = read_frame(s)
                if reply[:1] == bytes([6]):
                    accepted += 1
                    print(f"accepted as host {index}")
            except (EOFError, ConnectionError, socket.timeout, OSError):
                pass
            finally:
                close(s)

# Frames that are not a hello (every tag a daemon may send), and a frame claiming 16 MiB.
for tag in range(2, 16):
    s = None
    try:
        s = socket.create_connection((host, port), timeout=5)
        read_frame(s)
        s.sendall(frame(bytes([tag]) + b"\0" * 64))
        if read_frame(s)[:1] == bytes([6]):
            accepted += 1
    except (EOFError, ConnectionError, socket.timeout, OSError):
        pass
    finally:
        close(s)
s = None
try:
    s = socket.create_connection((host, port), timeout=5)
    read_frame(s)
    s.sendall(struct.pack(">I", 16 << 20) + b"\1" * 65536)
    read_frame(s)
except (EOFError, ConnectionError, socket.timeout, OSError):
    pass
finally:
    close(s)
print(f"accepted {accepted}")
