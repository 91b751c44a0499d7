"Shared pytest fixtures (kept minimal)."
import os, importlib
import pytest
from server_fixtures import serving

LLAMA_CPP_INSTALL = 'pip install "llama-cpp-python[server]==0.3.36"'

def _missing(what: str, why) -> None:
    "Skip when an optional dependency is missing, but fail when the environment variable CI is set."
    msg = f'{what} is not available ({why}). Install it with: {LLAMA_CPP_INSTALL}'
    if os.environ.get('CI'):
        pytest.fail(f'{msg}. CI is set, so a missing dependency is an error, not a skip.', pytrace=False)
    pytest.skip(msg)

@pytest.fixture(scope='session')
def llama_server(tmp_path_factory):
    "`(base_url, model_id)` of a llama-cpp-python server for SmolLM2-135M on 127.0.0.1, stopped at session end."
    why = None
    try: importlib.import_module('llama_cpp.server.app')
    except ImportError as e: why = e
    if why: _missing('llama_cpp.server', why)
    from wordbench.resources import LOCAL_MODELS, ResourceMissing
    from wordbench.bench.servers import LlamaCppServer
    try: gguf = LOCAL_MODELS['smollm2-135m'].gguf()
    except ResourceMissing as e: why = e
    if why: _missing('the SmolLM2-135M GGUF', why)
    yield from serving(LlamaCppServer(gguf, n_ctx=2048, log_path=tmp_path_factory.mktemp('llama_server')/'server.log'))


@pytest.fixture(scope='session')
def exports_dir(tmp_path_factory):
    "Every registered benchmark exported once, offline: `hf/` (dataset folders) and `lm-eval/` (task folders)."
    os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    from wordbench.systems import load_systems
    from wordbench.publish.export import export_hf, export_lm_eval
    load_systems()
    root = tmp_path_factory.mktemp('exports')
    export_hf(out=root/'hf')
    export_lm_eval(out=root/'lm-eval', hf=root/'hf')
    return root


@pytest.fixture(scope='session')
def hf_dir(exports_dir): return exports_dir/'hf'


@pytest.fixture(scope='session')
def lm_eval_dir(exports_dir): return exports_dir/'lm-eval'
