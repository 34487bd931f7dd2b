"""A light TCP connection, run inside a testbed host: 64 bytes each way every 0.1 s (an ssh
session being typed in, a chatty keep-alive). Enough data frames for its flow to count as
sending in its class, next to nothing in bytes.

  pingpong.py serve PORT                   echo one connection on PORT; prints READY
  pingpong.py talk DST DPORT CPORT SECS    talk from local port CPORT (0: any) for SECS;
                                           prints the round trips it made
"""
import socket
import sys
import time


def serve(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("", port))
    ls.listen(1)
    print("READY", flush=True)
    c, _ = ls.accept()
    while True:
        b = c.recv(4096)
        if not b:
            break
        c.sendall(b)


def talk(dst, dport, cport, secs):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", cport))
    s.connect((dst, dport))
    end, n = time.time() + secs, 0
    while time.time() < end:
        s.sendall(b"x" * 64)
        got = 0
        while got < 64:
            r = s.recv(4096)
            if not r:
                raise SystemExit("peer closed")
            got += len(r)
        n += 1
        time.sleep(0.1)
    s.close()
    print(n)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        talk(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
