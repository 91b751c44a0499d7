"Shared pytest fixtures (kept minimal)."
import os, sys, json, time, socket, subprocess, importlib, urllib.request
import pytest

LLAMA_CPP_INSTALL = 'pip install "llama-cpp-python[server]==0.3.36"'

def _missing(what: str, why) -> None:
    "Skip when an optional dependency is missing, but fail when the environment variable CI is set."
    msg = f'{what} is not available ({why}). Install it with: {LLAMA_CPP_INSTALL}'
    if os.environ.get('CI'): pytest.fail(f'{msg}. CI is set, so a missing dependency is an error, not a skip.', pytrace=False)
    pytest.skip(msg)

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

@pytest.fixture(scope='session')
def llama_server(tmp_path_factory):
    "`(base_url, model_id)` of a llama-cpp-python server for SmolLM2-135M on 127.0.0.1, stopped at session end."
    why = None
    try: importlib.import_module('llama_cpp.server.app')
    except ImportError as e: why = e
    if why: _missing('llama_cpp.server', why)
    from wordbench.resources import LOCAL_MODELS, ResourceMissing
    try: gguf = LOCAL_MODELS['smollm2-135m'].gguf()
    except ResourceMissing as e: why = e
    if why: _missing('the SmolLM2-135M GGUF', why)
    port, logf = _free_port(), tmp_path_factory.mktemp('llama_server') / 'server.log'
    cmd = [sys.executable, '-m', 'llama_cpp.server', '--model', str(gguf), '--host', '127.0.0.1',
           '--port', str(port), '--n_ctx', '2048']
    with open(logf, 'wb') as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url, opener = f'http://127.0.0.1:{port}/v1', urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f'llama_cpp.server exited with code {proc.returncode}:\n{logf.read_text()[-3000:]}', pytrace=False)
            try:
                with opener.open(url + '/models', timeout=2) as r: model_id = json.load(r)['data'][0]['id']; break
            except OSError: pass
            if time.monotonic() > deadline:
                pytest.fail(f'llama_cpp.server not ready after 120 s:\n{logf.read_text()[-3000:]}', pytrace=False)
            time.sleep(0.5)
        yield url, model_id
    finally:
        proc.terminate()
        try: proc.wait(timeout=15)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()
