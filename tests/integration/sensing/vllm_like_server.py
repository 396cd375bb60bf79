"""A stand-in for a vLLM server, for tests: the metrics page a real agent scrapes and a /generate to call.

Run as a replica task's command: ``python vllm_like_server.py [RUNNING WAITING]``. It listens on
127.0.0.1:$SUANLI_SERVICE_PORT (the port the agent gave it), reports RUNNING and WAITING as its
scheduler gauges (fixed, so a test knows what the agent must publish) and counts each
``POST /generate {"context_tokens": N, "max_tokens": M}`` as a finished request of N prompt and M
generated tokens that took ``latency_s`` (the body's, default 0.5 s; it answers at once).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTS = {"finished": 0, "prompt": 0, "generated": 0, "latency_sum": 0.0}
GAUGES = {"running": 0, "waiting": 0}


def page() -> str:
    with LOCK:
        c, g = dict(COUNTS), dict(GAUGES)
    label = 'model_name="stand-in"'
    return "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {g['running']}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {g['waiting']}",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{label}}} 0.5",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{finished_reason="stop",{label}}} {c["finished"]}',
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {c['prompt']}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {c['generated']}",
            "# TYPE vllm:e2e_request_latency_seconds histogram",
            f'vllm:e2e_request_latency_seconds_bucket{{le="+Inf",{label}}} {c["finished"]}',
            f"vllm:e2e_request_latency_seconds_count{{{label}}} {c['finished']}",
            f"vllm:e2e_request_latency_seconds_sum{{{label}}} {c['latency_sum']}",
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="100"} 1.0',
            "",
        ]
    )


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        self._send(200, page().encode(), "text/plain; version=0.0.4")

    def do_POST(self) -> None:
        if self.path != "/generate":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        generated = int(body.get("max_tokens", 16))
        latency = float(body.get("latency_s", 0.5))
        with LOCK:
            COUNTS["finished"] += 1
            COUNTS["prompt"] += int(body.get("context_tokens", 0))
            COUNTS["generated"] += generated
            COUNTS["latency_sum"] += latency
        answer = {
            "generated_tokens": generated,
            "ttft_s": latency / 10,
            "latency_s": latency,
            "replica_id": os.environ.get("SUANLI_SERVICE_REPLICA", ""),
        }
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet: the agent keeps task output
        pass


def main() -> None:
    if len(sys.argv) == 3:
        GAUGES["running"], GAUGES["waiting"] = int(sys.argv[1]), int(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["SUANLI_SERVICE_PORT"])), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
