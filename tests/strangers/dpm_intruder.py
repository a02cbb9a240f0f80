# Run (after wire.py) by tests/tests/dpm.rs as a second local user while a job waits in
# MPI_Comm_accept. argv: the server's name-service directory, then host:port of every listener
# of the server's ranks. It does what a stranger on the host can: try to read the published port
# name, then on every listener guess the port (tags 0..7, a zero and a random token), send a
# Connect with a proof made from the guess, a SpawnFailed carrying a stranger's text, and
# frames that open without answering the challenge. Prints "accepted N" (Accept frames it got)
# last; exit 0.
import hashlib
import hmac
import os
import socket
import struct
import sys

names, listeners = sys.argv[1], sys.argv[2:]
try:
    for f in os.listdir(names):
        open(os.path.join(names, f)).read()
        print(f"read the name file {f}")
except OSError as e:
    print(f"name service: {e.strerror}")


HEAD = b"KDPM" + bytes([2])


def proof(token, label, tag, nonce):
    m = hmac.new(token, label, hashlib.sha256)
    for part in (struct.pack(">I", tag), nonce):
        m.update(struct.pack(">I", len(part)) + part)
    return m.digest()


def attempt(host, port, body_of):
    s = None
    try:
        s = socket.create_connection((host, port), timeout=3)
        challenge = read_frame(s)
        nonce = challenge[10:] if challenge[:6] == HEAD + bytes([9]) else b""
        s.sendall(frame(body_of(nonce)))
        reply = read_frame(s)
        return reply[5:6]
    except (EOFError, ConnectionError, socket.timeout, OSError):
        return b""
    finally:
        if s is not None:
            s.close()


group = struct.pack(">I", 1) + blob(b"stranger") + struct.pack(">I", 0) + blob(b"n") + blob(b"127.0.0.1:1")
accepted = 0
for target in listeners:
    host, port = target.rsplit(":", 1)
    port = int(port)
    for tag in range(8):
        for token in (bytes(16), os.urandom(16)):
            def connect(nonce, tag=tag, token=token):
                p = proof(token, b"kestrel-port-v2 connect", tag, nonce)
                return HEAD + bytes([1]) + struct.pack(">I", tag) + blob(p) + blob(os.urandom(32)) + group + struct.pack(">H", 9)

            if attempt(host, port, connect) == bytes([2]):
                accepted += 1
                print(f"accepted on {target} tag {tag}")

            def spawn_failed(nonce, tag=tag, token=token):
                p = proof(token, b"kestrel-port-v2 spawn-failed", tag, nonce)
                return HEAD + bytes([8]) + struct.pack(">I", tag) + blob(p) + blob(b"a stranger's text")

            attempt(host, port, spawn_failed)
    # Frames that ignore the challenge: every message type with junk.
    for kind in range(1, 12):
        attempt(host, port, lambda nonce, kind=kind: HEAD + bytes([kind]) + b"\0" * 40)
print(f"accepted {accepted}")
