"""A kube-scheduler extender (``python -m bridges.extender``): an HTTP server that answers kube-scheduler's
``filter`` and ``prioritize`` calls for GPU pods from a gpusched placement rule
(:data:`~envs.placement.PLACEMENT_RULES`) or the scored placement of a ``k8s:`` profile (:mod:`baselines.kubernetes`).
Its guide is ``docs/bridges/extender.md``.

It only answers HTTP: kube-scheduler decides and binds; the extender never binds a pod, never writes to the API
server and reads nothing but its two files. What it knows of the cluster, and what it leaves to kube-scheduler (CPU,
memory, MIG profiles, taints, affinity), is in :mod:`bridges.kube_view`; the wire format (kubernetes/kubernetes
``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``), the verbs' answers and the time budget are in
:mod:`bridges.extender_verbs`.

HTTP: ``POST .../filter`` and ``POST .../prioritize`` (the verb is the last segment of the path, so any ``urlPrefix``
path works), ``GET .../healthz`` (200 with the rule and the GPU nodes, 503 when a file cannot be read). A bad request
gets 400 and ``{"Error": "one line naming what is wrong"}``; an unknown verb 404; a body without a length 411, one
over ``--max-body-mib`` 413 (the body is not read); a fault of the rule 500 (the server keeps serving). Connections
are kept alive (HTTP/1.1, as Go's client expects) and closed after :data:`SOCKET_TIMEOUT_S` of silence.
"""

from __future__ import annotations

import json
import logging
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from baselines.kubernetes import KUBE_PREFIX, KUBE_PROFILES
from bridges.extender_verbs import DEFAULT_BUDGET_MS, VERBS, Extender, placement_rule
from bridges.kube_view import ClusterFileError
from envs.core.cli import ArgumentParser, at_least, run_cli
from envs.placement import PLACEMENT_RULES

DEFAULT_MAX_BODY_MIB = 16
"""Largest request body read [MiB]: a ``NodeNames`` request of 10,000 nodes is under 1 MiB, a ``Nodes`` request of a
few thousand full Node objects fits."""

SOCKET_TIMEOUT_S = 30.0
"""How long a connection may sit idle or send slowly before it is closed [s]."""

log = logging.getLogger(__name__)


class ExtenderServer(ThreadingHTTPServer):
    """The HTTP server of an :class:`Extender`: one thread per connection, bodies up to ``max_body_bytes``."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], extender: Extender,
                 max_body_bytes: int = DEFAULT_MAX_BODY_MIB * 2**20) -> None:
        super().__init__(address, _Handler)
        self.extender, self.max_body_bytes = extender, max_body_bytes

    def server_close(self) -> None:
        super().server_close()
        self.extender.close()


class _Handler(BaseHTTPRequestHandler):
    """POST ``.../filter`` and ``.../prioritize``; GET ``.../healthz``."""

    server: ExtenderServer
    protocol_version = "HTTP/1.1"  # keep-alive, as Go's client expects
    timeout = SOCKET_TIMEOUT_S

    def do_POST(self) -> None:
        verb = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        length_text = self.headers.get("Content-Length")
        if verb not in VERBS:
            self._send(404, {"Error": f"unknown verb {verb!r}: this extender serves {', '.join(VERBS)}"}, close=True)
        elif length_text is None:
            self._send(411, {"Error": "the request has no Content-Length"}, close=True)
        elif not length_text.strip().isdigit():
            self._send(400, {"Error": f"Content-Length {length_text!r} is not a byte count"}, close=True)
        elif int(length_text) > self.server.max_body_bytes:
            self._send(413, {"Error": f"the body of {int(length_text):,} bytes is over the limit of "
                                      f"{self.server.max_body_bytes:,}"}, close=True)
        else:
            body = self.rfile.read(int(length_text))
            self._send(*self.server.extender.answer(verb, body))

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].rstrip("/").endswith("/healthz"):
            self._send(*self.server.extender.health())
        else:
            self._send(404, {"Error": "GET serves .../healthz only; the verbs are POSTed"})

    def _send(self, status: int, answer: Any, close: bool = False) -> None:
        body = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:  # the body was not read: the connection cannot carry another request
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s " + format, self.address_string(), *args)


def main(argv: list[str] | None = None) -> int:
    """``python -m bridges.extender``: serve until interrupted."""
    parser = ArgumentParser(prog="python -m bridges.extender",
                            description="Answer kube-scheduler's filter and prioritize calls for GPU pods from a "
                                        "gpusched placement rule (guide: docs/bridges/extender.md).")
    parser.add_argument("--nodes", required=True, help="kubectl get nodes -o json file (read again when it changes)")
    parser.add_argument("--pods", help="kubectl get pods -A -o json file of the pods holding GPUs (read again when it "
                                       "changes); without it nothing is held")
    parser.add_argument("--rule", default="pack",
                        help=f"placement rule ({', '.join(PLACEMENT_RULES)}) or Kubernetes profile "
                             f"({', '.join(KUBE_PREFIX + name for name in KUBE_PROFILES)}); default pack")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=at_least(0), default=8888, help="port (default 8888; 0: any free one)")
    parser.add_argument("--budget-ms", type=at_least(1), default=DEFAULT_BUDGET_MS,
                        help=f"time to answer one request [ms] (default {DEFAULT_BUDGET_MS})")
    parser.add_argument("--max-body-mib", type=at_least(1), default=DEFAULT_MAX_BODY_MIB,
                        help=f"largest request body [MiB] (default {DEFAULT_MAX_BODY_MIB})")
    parser.add_argument("--debug", action="store_true", help="tracebacks instead of one-line errors; log requests")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if options.debug else logging.WARNING, format="%(asctime)s %(message)s")

    def run() -> int:
        extender = Extender(options.nodes, options.pods, placement_rule(options.rule), options.rule,
                            options.budget_ms / 1000)
        status, health = extender.health()
        if status != 200:
            raise ClusterFileError(health["Error"])
        server = ExtenderServer((options.host, options.port), extender, options.max_body_mib * 2**20)
        host, port = server.server_address[:2]
        print(f"gpusched extender: rule {options.rule}, {health['gpu_nodes']} GPU nodes, {health['held_gpus']} GPUs "
              f"held; serving {' and '.join(VERBS)} at http://{host}:{port}/gpusched/ (budget {options.budget_ms} ms)",
              flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0

    return run_cli(parser.prog, run, options.debug)


if __name__ == "__main__":
    sys.exit(main())
