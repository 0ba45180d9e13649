"""A tiny stand-in for the Crash KB service, run as a real process on 127.0.0.1.

It accepts `POST /incidents` (multipart field `log` plus form fields), records every
request it receives to a JSON-lines file (so tests can prove nothing was lost and nothing
arrived twice), and answers in the documented shape. It is a test double at the edge of
the world: the client's spool, retry and idempotency behaviour is tested against it; the
end-to-end tests run against the real `kb serve`.

Usage: standin_server.py --port P --record FILE [--fail-first N] [--status CODE]
                          [--token T] [--delay S [--delay-first N]]
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_EXC = re.compile(r"^(?:\((?P<proc>[^)]*)\)\s+)?(?:ERROR \S+ \S+ \[[^\]]*\]\s+)?(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<msg>.*)$")


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], bytes | None]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    fields: dict[str, str] = {}
    log = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "log":
            log = payload
        elif name:
            fields[name] = payload.decode("utf-8", "replace")
    return fields, log


def root_cause(text: str) -> dict | None:
    """First exception line that is not a known wrapper: crude, enough for a stand-in."""
    found = []
    for line in text.splitlines():
        match = _EXC.match(line.strip())
        if match:
            found.append({"exception": match["exc"], "message": match["msg"], "process": match["proc"]})
    for event in found:
        if "initialization failed" not in event["message"] and "failed to start" not in event["message"]:
            return event
    return found[-1] if found else None


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.uploads = 0
        self.answers: dict[str, dict] = {}
        self.next_id = 1


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"detail": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/incidents":
                self._send(404, {"detail": "not found"})
                return
            args = state.args
            key = self.headers.get("Idempotency-Key")
            fields, log = parse_multipart(self.headers.get("Content-Type", ""), body)
            with state.lock:
                state.uploads += 1
                number = state.uploads
                if args.status:
                    code = args.status
                elif args.token and self.headers.get("Authorization") != f"Bearer {args.token}":
                    code = 401
                elif number <= args.fail_first:
                    code = 503
                elif not log:
                    code = 400
                else:
                    code = 201
                replay = code == 201 and key is not None and key in state.answers
                if replay:
                    answer, code = state.answers[key], 200
                elif code == 201:
                    text = log.decode("utf-8", "replace")
                    incident_id = state.next_id
                    state.next_id += 1
                    cause = root_cause(text)
                    answer = {
                        "incident": {
                            "id": incident_id,
                            "url": f"http://{self.headers.get('Host')}/incidents/{incident_id}",
                            "title": "stand-in incident",
                            "occurrences": 1,
                            "first_seen": None,
                            "last_seen": None,
                        },
                        "occurrence": {"id": incident_id},
                        "analysis": {"root_cause": cause},
                        "match": {"status": "new", "incident_id": incident_id, "score": 0.0},
                        "similar": [],
                        "fixes": [],
                        "recommendation": {"path": "investigate", "fix_id": None,
                                           "reason": "stand-in server knows nothing"},
                    }
                    if key:
                        state.answers[key] = answer
                record = {
                    "n": number,
                    "answered": code,
                    "replay": replay,
                    "idempotency_key": key,
                    "authorization": self.headers.get("Authorization"),
                    "fields": fields,
                    "log_sha256": hashlib.sha256(log).hexdigest() if log is not None else None,
                    "log": log.decode("utf-8", "replace") if log is not None else None,
                }
                with open(args.record, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")
            if args.delay and (not args.delay_first or number <= args.delay_first):
                time.sleep(args.delay)
            if code in (200, 201):
                self._send(code, answer)
            elif code == 503:
                self._send(503, {"detail": "database unavailable, retry later"})
            else:
                self._send(code, {"detail": f"stand-in answers {code}"})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--token", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--delay-first", type=int, default=0, help="delay only the first N uploads")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State(args)))
    server.daemon_threads = True
    print(f"listening on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
