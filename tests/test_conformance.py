"""The conformance matrix: a tiny random model of every family in `models.conformance.FAMILIES` (built here, over
tokenizers trained here: nothing is downloaded) under each attention implementation it has, through the public paths
(`get_lm` on the saved folder, `wordbench score`), against plain forward passes and `model.generate`; families
wordbench cannot serve must be refused at load; `wordbench report` runs end to end on a few families.

`wordbench score` runs in-process (`cli.main`) for every served causal family under its default implementation, and
once as a real subprocess (Gemma-2, eager). `wordbench report` runs as a subprocess on Gemma-2 only, with two tasks
(`REPORT_TASKS`, one generating, one scoring) cut to n=2, sample=1: every task takes minutes on 2 cores (probes-cloze
alone scores 4,700 top-k rows). The benchmark template `nbs/analysis/conformance_matrix.ipynb` runs it on every
family."""
import json, os, subprocess, sys
from pathlib import Path
import pytest

torch = pytest.importorskip('torch')
from wordbench.models.conformance import (FAMILIES, SPECIAL_TOKENS, LL_TOL, build_family, conformance, implementations,  # noqa: E402
                                   missing_reason, train_tokenizer, plain_loglikelihood)

WORDBENCH = Path(sys.executable).parent/'wordbench'
CELLS = [(f, a) for f, x in FAMILIES.items() for a in (('eager', 'sdpa') if x.kind == 'causal' else ('-',))]
SERVED = [f for f, x in FAMILIES.items() if x.kind == 'causal' and x.served]
REPORT_TASKS = ['newterm-coma', 'newterm-coma-ll']   # generation (max_tokens 8 on the cpu grid) and scoring


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    "One intra-op thread: these models are tiny, and the suite shares 2 cores with other processes."
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
    "`folder(family, attn)`: the family's tiny model saved with `attn` (built once per module), over shared tokenizers."
    root = tmp_path_factory.mktemp('families')
    toks, made = {k: train_tokenizer(root/f'tok-{k}', k) for k in SPECIAL_TOKENS}, {}
    def get(family, attn):
        if (family, attn) not in made:
            why = missing_reason(family)
            if why: pytest.skip(why)
            made[family, attn] = build_family(family, root/f'{family}-{attn}', 'eager' if attn == '-' else attn,
                                              toks[FAMILIES[family].kind])
        return made[family, attn]
    return get


def default_attn(family):
    "The implementation `from_pretrained` picks for a user's folder: sdpa where the family has it."
    return implementations(family)[-1]


@pytest.mark.parametrize('family, attn', CELLS)
def test_matrix(family, attn, folder):
    if attn != '-' and attn not in implementations(family):
        pytest.skip(f'{FAMILIES[family].model} has no {attn} attention in this transformers')
    rows = conformance(family, attn, folder(family, attn))
    assert rows and all(r.passed for r in rows), [(r.check, r.detail) for r in rows if not r.passed]



@pytest.mark.parametrize('family', [f for f in SERVED if 'sdpa' in implementations(f)])
def test_matrix_chunked_attention(family, folder, monkeypatch):
    "Packed scoring's SDPA in chunks of 4 queries (`causal_chunked_attention`): every check of the matrix still holds."
    monkeypatch.setattr('wordbench.models.hf_kernels.CAUSAL_CHUNK', 4)
    rows = conformance(family, 'sdpa', folder(family, 'sdpa'))
    assert rows and all(r.passed for r in rows), [(r.check, r.detail) for r in rows if not r.passed]

@pytest.mark.parametrize('family', SERVED)
def test_score_command(family, folder, tmp_path):
    "`wordbench score` on the folder: log-likelihoods of a plain forward pass, greedy replies of `model.generate`."
    from wordbench.cli import main
    from wordbench.models.lm import get_lm, GenerateRequest, LoglikelihoodRequest
    from wordbench.models.hf import generate_alone
    path = folder(family, default_attn(family))
    lines = [{'id': 0, 'context': 'The robin sat on the', 'continuation': ' mat.'},
             {'id': 1, 'prompt': 'Paris is the capital of', 'max_tokens': 6},
             {'id': 2, 'messages': [{'role': 'user', 'content': 'One two'}], 'max_tokens': 6}]
    (tmp_path/'in.jsonl').write_text(''.join(json.dumps(x) + '\n' for x in lines))
    assert main(['score', '--backend', 'hf', '--model', path, '--input', str(tmp_path/'in.jsonl'),
                 '--output', str(tmp_path/'out.jsonl'), '--no-cache']) == 0
    out = [json.loads(x) for x in (tmp_path/'out.jsonl').read_text().splitlines()]
    lm = get_lm('hf', path)
    want = plain_loglikelihood(lm.model, lm.tokenizer, LoglikelihoodRequest('The robin sat on the', ' mat.'))
    assert abs(out[0]['logprob'] - want[0]) <= LL_TOL and out[0]['is_greedy'] == want[1], (out[0], want)
    asks = [GenerateRequest(prompt='Paris is the capital of', max_tokens=6),
            GenerateRequest(messages=(('user', 'One two'),), max_tokens=6)]
    assert [o['text'] for o in out[1:]] == [generate_alone(lm, r)[0].text for r in asks]
    assert [o['prompt_format'] for o in out[1:]] == ['raw', 'chat-template']


def test_score_subprocess_gemma2_eager(folder, tmp_path):
    "The console script itself on an eager-only family: the same replies as `get_lm` in this process."
    from wordbench.models.lm import get_lm, GenerateRequest
    path = folder('gemma2', 'eager')
    (tmp_path/'in.jsonl').write_text(json.dumps({'prompt': 'The robin sat on the', 'max_tokens': 8}) + '\n')
    run = subprocess.run([str(WORDBENCH), 'score', '--backend', 'hf', '--model', path, '--input',
                          str(tmp_path/'in.jsonl'), '--output', str(tmp_path/'out.jsonl'), '--no-cache'],
                         capture_output=True, text=True, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads((tmp_path/'out.jsonl').read_text())
    want = get_lm('hf', path).generate([GenerateRequest(prompt='The robin sat on the', max_tokens=8)])[0]
    assert (got['text'], got['completion_tokens']) == (want.text, want.completion_tokens)


def test_report_end_to_end(folder, tmp_path):
    "`wordbench report` on a tiny random Gemma-2 folder (eager, sliding windows, soft-caps): tasks run, a card written."
    path = folder('gemma2', 'eager')
    run = subprocess.run([str(WORDBENCH), 'report', '--backend', 'hf', '--model', path, '--tasks', *REPORT_TASKS,
                          '--task-option', 'n=2',
                          '--task-option', 'sample=1', '--results', str(tmp_path/'res'), '--out', str(tmp_path/'card'),
                          '--cache', str(tmp_path/'cache.sqlite')], capture_output=True, text=True, timeout=600,
                         env={**os.environ, 'OMP_NUM_THREADS': '1', 'WORDBENCH_CACHE': str(tmp_path/'wbcache')})
    assert run.returncode == 0, run.stderr[-3000:]
    page = (tmp_path/'card'/'README.md').read_text()
    assert '## Headline per system' in page and all(f'## {t}: ' in page for t in REPORT_TASKS), page[:500]
    assert len(list((tmp_path/'res').glob('*.csv.gz'))) == len(REPORT_TASKS)
