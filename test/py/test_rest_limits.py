"""Issue 42.3: every refusal of the REST API is weir's JSON error, including those
libmicrohttpd used to answer itself in HTML (a bad Content-Length, an HTTP version other than
1.0/1.1, a URL or head too large) or not at all (2,000 query parameters)."""
import json
import os
import socket
import time

import pytest

from test_rest import WEIR, Weir

pytestmark = [pytest.mark.skipif(not WEIR.exists(), reason=f"weir not built at {WEIR}"),
              pytest.mark.skipif(os.geteuid() != 0, reason="weir on net_pcap ports is run as root")]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    w = Weir(tmp_path_factory.mktemp("limits"), "limits")
    yield w
    w.stop()


def exchange(w, *pieces, pause=0.0):
    """Send the pieces (bytes) on one connection, pause s between them; the whole answer
    until weir closes or 5 s pass."""
    s = socket.create_connection(("127.0.0.1", w.port), timeout=5)
    out = b""
    try:
        for i, p in enumerate(pieces):
            if i and pause:
                time.sleep(pause)
            try:
                s.sendall(p)
            except OSError:
                break
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            out += b
            head, sep, body = out.partition(b"\r\n\r\n")
            cl = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length:")]
            if sep and cl and len(body) >= cl[0]:
                break
    finally:
        s.close()
    return out


def assert_json_error(answer, code):
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {code} "), answer[:300]
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
    assert headers.get("content-type") == "application/json", answer[:300]
    e = json.loads(body)
    assert set(e) == {"error"} and e["error"]["code"] == code, e
    assert isinstance(e["error"]["message"], str) and e["error"]["message"]
    return e["error"]["message"]


def post(cl):
    return (f"POST /api/v1/counters/reset HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {cl}\r\n\r\n").encode()


@pytest.mark.parametrize("cl,code", [("-1", 400), ("18446744073709551616", 413),
                                     ("99999999999999999999999", 413), ("1x", 400), ("", 400)])
def test_bad_content_length(api, cl, code):
    msg = assert_json_error(exchange(api, post(cl)), code)
    assert "Content-Length" in msg


@pytest.mark.parametrize("version", ["HTTP/2.0", "HTTP/0.9", "HTTP/3.1"])
def test_http_version(api, version):
    assert_json_error(exchange(api, f"GET /api/v1/status {version}\r\nHost: x\r\n\r\n".encode()),
                      505)


def test_long_url(api):
    msg = assert_json_error(exchange(api, b"GET /api/v1/" + b"a" * 9000 +
                                     b" HTTP/1.1\r\nHost: x\r\n\r\n"), 414)
    assert "8192" in msg


def test_url_of_2000_query_parameters(api):
    query = "&".join(f"limit={i}" for i in range(2000))
    assert len(query) > 18000
    assert_json_error(exchange(api, f"GET /api/v1/flows?{query} HTTP/1.1\r\nHost: x\r\n\r\n"
                               .encode()), 414)
    query = "&".join(["limit=1"] * 65)
    msg = assert_json_error(exchange(api, f"GET /api/v1/flows?{query} HTTP/1.1\r\nHost: x"
                                     f"\r\n\r\n".encode()), 414)
    assert "64 query parameters" in msg


def test_large_headers(api):
    big = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"v" * 1000) for i in range(20))
    assert_json_error(exchange(api, b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n" + big +
                               b"\r\n"), 431)
    # The same head sent in pieces: counted as it comes.
    pieces = [b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n"] + \
        [b"X-Pad-%d: %s\r\n" % (i, b"v" * 1000) for i in range(20)] + [b"\r\n"]
    assert_json_error(exchange(api, *pieces, pause=0.02), 431)


def test_malformed_head(api):
    assert_json_error(exchange(api, b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n"
                                    b"no colon here\r\n\r\n"), 400)
    assert_json_error(exchange(api, b"GET\r\nHost: x\r\n\r\n"), 400)


def test_good_requests_still_answered(api):
    """Within the limits, whole or in pieces, kept alive: answered as before."""
    for pieces in ([b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n"],
                   [b"GET /api/v1/st", b"atus HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n"],
                   [b"GET /api/v1/status HTTP/1.0\r\n\r\n"]):
        answer = exchange(api, *pieces, pause=0.05)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    query = "&".join(["limit=1"] * 64)
    answer = exchange(api, f"GET /api/v1/flows?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    status, _, _ = api.request("GET", "/api/v1/status")
    assert status == 200
