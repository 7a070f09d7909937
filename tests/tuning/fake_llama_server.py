#!/usr/bin/env python3
"""A stand-in for llama.cpp's llama-server, for the settings layer's CPU
test (settings_cli_test.sh): it answers GET /health and POST /completion
the way the real one does (token ids with "return_tokens", decode time in
"timings"), and `--version` with the two lines the real one prints. What it
does is told through the environment, keyed by one of its flags and value
("--spec-type=ngram-mod"):

  FAKE_LLAMA_SPEED=FLAG=V:F[;...]   decode time times F for runs with FLAG V
  FAKE_LLAMA_CHANGE=FLAG=V@P:I      prompt P (1-based) gets another token at
                                    position I for runs with FLAG V
  FAKE_LLAMA_NOISE=A                runs with any flag: the decode time of the
                                    k-th completion times (1-A, 1, 1+A)[k % 3]
  FAKE_LLAMA_DIE=FLAG=V             such a run fails to start (its last words
                                    on stderr)
  FAKE_LLAMA_DIE_ALL=1              every run fails to start
  FAKE_LLAMA_SLOW=S                 every completion takes S seconds
  FAKE_LLAMA_PIDFILE=PATH           appends its pid to PATH when listening
"""
import hashlib
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def parse_args(argv):
    flags, host, port = {}, "127.0.0.1", 8080
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[a] = argv[i + 1]
            i += 2
        else:
            flags[a] = ""
            i += 1
    host = flags.get("--host", host)
    port = int(flags.get("--port", port))
    return flags, host, port


def keyed(spec, flags):
    """Entries of SPEC ("FLAG=V:X;FLAG=V:Y") whose FLAG=V this run has."""
    out = []
    for part in filter(None, (spec or "").split(";")):
        key, _, rest = part.partition(":") if "@" not in part else part.partition("@")
        flag, _, value = key.partition("=")
        if flags.get(flag) == value:
            out.append(rest)
    return out


def main():
    if "--version" in sys.argv:
        sys.stderr.write("version: 9999 (fake0000)\nbuilt with fake_llama_server.py for the settings test\n")
        return 0
    flags, host, port = parse_args(sys.argv[1:])
    model = flags.get("-m", "")
    if os.environ.get("FAKE_LLAMA_DIE_ALL") or keyed(os.environ.get("FAKE_LLAMA_DIE", "") + ":", flags):
        sys.stderr.write("main: loading model\n")
        sys.stderr.write("llama_model_load: error loading model: fake failure for this setting\n")
        sys.stderr.write("main: exiting due to model loading error\n")
        return 1
    speed = 1.0
    for f in keyed(os.environ.get("FAKE_LLAMA_SPEED"), flags):
        speed *= float(f)
    change = None
    for c in keyed(os.environ.get("FAKE_LLAMA_CHANGE"), flags):
        p, _, i = c.partition(":")
        change = (int(p), int(i))
    noise = float(os.environ.get("FAKE_LLAMA_NOISE", "0")) if any(k not in ("-m", "--host", "--port") for k in flags) else 0.0
    slow = float(os.environ.get("FAKE_LLAMA_SLOW", "0"))
    state = {"k": 0, "prompts": {}}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("srv: " + (fmt % args) + "\n")

        def send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self.send(200, {"status": "ok"})
            else:
                self.send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            if self.path != "/completion":
                self.send(404, {"error": {"message": "not found"}})
                return
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            prompt, n = req.get("prompt", ""), int(req.get("n_predict", 16))
            if req.get("temperature") != 0 or req.get("top_k") != 1 or not req.get("return_tokens"):
                self.send(400, {"error": {"message": "the fake wants greedy sampling and return_tokens"}})
                return
            if prompt not in state["prompts"]:
                state["prompts"][prompt] = len(state["prompts"]) + 1
            h = hashlib.sha256((model + "|" + prompt).encode()).digest()
            toks = [(h[i % 32] * 131 + i * 7) % 151936 for i in range(n)]
            # the prompts' order of the run: the warm-up is the first prompt, so
            # the k-th distinct prompt is prompt k of the file
            pno = state["prompts"][prompt]
            if change and change[0] == pno and change[1] < n:
                toks[change[1]] = (toks[change[1]] + 1) % 151936
            if slow:
                time.sleep(slow)
            k = state["k"]
            state["k"] += 1
            f = speed * ((1 - noise, 1.0, 1 + noise)[k % 3] if noise else 1.0)
            ms = 2.0 * n * f
            time.sleep(min(ms / 1000.0, 0.05))
            self.send(200, {"content": "", "tokens": toks, "stop": True,
                            "timings": {"predicted_n": n, "predicted_ms": ms, "prompt_n": 4, "prompt_ms": 1.0}})

    srv = HTTPServer((host, port), Handler)
    pidfile = os.environ.get("FAKE_LLAMA_PIDFILE")
    if pidfile:
        with open(pidfile, "a") as f:
            f.write("%d\n" % os.getpid())
    sys.stderr.write("main: server is listening on http://%s:%d\n" % (host, port))
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
