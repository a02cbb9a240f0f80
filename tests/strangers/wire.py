# Framing shared by the intruder programs (prepended to each by the tests): a frame is a
# 4-byte big-endian length and the body; byte strings inside carry a 4-byte length too.
import struct


def frame(body):
    return struct.pack(">I", len(body)) + body


def blob(b):
    return struct.pack(">I", len(b)) + b


def recvn(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def read_frame(s):
    (n,) = struct.unpack(">I", recvn(s, 4))
    return recvn(s, min(n, 1 << 20))
