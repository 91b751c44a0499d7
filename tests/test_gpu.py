"""The `hf` backend on a CUDA device against CPU float32, on small random Llama and Gemma 3 models.

Marked `gpu`: without a CUDA device every test skips ("no CUDA device"). The tokenizer and the models are built by
`tests/gpu/check.py` (a byte-level BPE tokenizer trained here, seeded random models saved to folders and loaded by
path, Gemma 3's MLP gains raised until fp16 overflows), so nothing is downloaded. Exactness is asserted only where
it holds: CUDA float32 against CPU float32 (scores within 1e-4 nats, the same decisions and top words) and the
decoding engine against `model.generate` in float32. Low precision moves scores and decisions by amounts that depend
on the model and the GPU: those tests report the figures (printed, and in `$GPU_TEST_FIGURES` as JSON lines when
set) and assert only what the fp32 re-check guarantees, that a re-checked decision is the CPU's.
`GPU_TEST_DEVICE=cpu` runs the same tests with the CPU in the GPU's place, to try this file without a GPU.
"""
import importlib.util, json, math, os, sys
from pathlib import Path
import pytest

torch = pytest.importorskip('torch')
DEVICE = os.environ.get('GPU_TEST_DEVICE', 'cuda')
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DEVICE == 'cuda' and not torch.cuda.is_available(),
                                                  reason='no CUDA device')]

FP32_TOL = 1e-4   # nats: the H200 run of 2026-11-27 measured at most 6.1e-05 between CUDA and CPU fp32
TIE = 2e-4        # nats: CPU margins this small may flip under fp32 rounding; no decision is asserted for them


def _check_module():
    spec = importlib.util.spec_from_file_location('wb_gpu_check', Path(__file__).parent/'gpu'/'check.py')
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope='module')
def check():
    return _check_module()


@pytest.fixture(scope='module')
def built(check, tmp_path_factory):
    "`(folders, requests)`: the check's tokenizer, llama-s and gemma3-s (quick sizes) and its quick requests."
    root = tmp_path_factory.mktemp('gpu_models')
    lines, words = check.corpus()
    tok = check.build_tokenizer(root/'tokenizer', lines * 2, vocab=1024)
    folders = {}
    for kind in ('llama-s', 'gemma3-s'):
        check.build_model(kind, root/kind, tok, quick=True)
        folders[kind] = root/kind
    return folders, check.make_requests(words, quick=True)


@pytest.fixture(scope='module', params=['llama-s', 'gemma3-s'])
def model(request, built, check):
    "`(kind, folder, requests, CPU fp32 ChoiceScores)`."
    from wordbench.evaluate.choices import score_choices
    folders, reqs = built
    cpu, _ = check.load_lm(folders[request.param], 'cpu')
    return request.param, folders[request.param], reqs, score_choices(cpu, reqs['decisions'])


def _decisions(scores):
    from wordbench.evaluate.choices import decide
    return [decide(s) for s in scores]


def _clear(scores):
    "Indices of the decisions whose best two alternatives are more than `TIE` apart."
    gap = lambda d: (lambda s: s[0] - s[1])(sorted((x[0] for x in d), reverse=True))
    return [i for i, d in enumerate(scores) if len(d) < 2 or gap(d) > TIE]


def test_fp32_scores_and_decisions(model, check):
    "CUDA float32: every score within 1e-4 nats of the CPU's, finite, and the same decisions."
    from wordbench.evaluate.choices import score_choices
    kind, folder, reqs, cpu = model
    lm, _ = check.load_lm(folder, DEVICE)
    if DEVICE == 'cuda': assert ':cuda' in lm.identity()
    gpu = score_choices(lm, reqs['decisions'])
    pairs = [(a[0], b[0]) for da, db in zip(cpu.scores, gpu.scores) for a, b in zip(da, db)]
    assert all(math.isfinite(b) for _, b in pairs)
    worst = max(abs(a - b) for a, b in pairs)
    print(f'{kind} {DEVICE} float32: max |Δ log-prob| {worst:.2e} over {len(pairs)} requests')
    assert worst <= FP32_TOL
    keep = _clear(cpu.scores)
    assert [_decisions(cpu.scores)[i] for i in keep] == [_decisions(gpu.scores)[i] for i in keep]


def test_fp32_topk(model, check):
    "CUDA float32 top-k: the k largest log-probs within 1e-4 of the CPU's; the same top word unless a near-tie."
    kind, folder, reqs, _ = model
    cpu, _ = check.load_lm(folder, 'cpu')
    gpu, _ = check.load_lm(folder, DEVICE)
    for a, b in zip(cpu.topk(reqs['topk']), gpu.topk(reqs['topk'])):
        assert len(a.words) == len(b.words)
        # the j-th largest value moves by at most the largest change, whichever tokens hold it
        assert all(abs(x[1] - y[1]) <= FP32_TOL for x, y in zip(a.words, b.words))
        if len(a.words) > 1 and a.words[0][1] - a.words[1][1] > TIE: assert a.words[0][0] == b.words[0][0]


def test_fp32_engine_equals_generate_alone(model, check):
    "CUDA float32: the decoding engine's greedy texts equal `model.generate` on each request alone."
    from wordbench.models.hf import generate_alone
    kind, folder, reqs, _ = model
    lm, _ = check.load_lm(folder, DEVICE)
    batched = lm.generate(reqs['greedy'])
    assert [g.text for g in batched] == [generate_alone(lm, r)[0].text for r in reqs['greedy']]


def _report(row: dict):
    print(json.dumps(row))
    if os.environ.get('GPU_TEST_FIGURES'):
        with open(os.environ['GPU_TEST_FIGURES'], 'a') as f: f.write(json.dumps(row) + '\n')


@pytest.mark.parametrize('dtype', ['bfloat16', 'float16', 'bfloat16-autocast'])
def test_low_precision_figures(model, check, dtype):
    "Low precision: |Δ|, non-finite scores, flips before and after the re-check, share re-checked, engine = generate."
    from wordbench.evaluate.choices import score_choices
    from wordbench.models.hf import generate_alone
    kind, folder, reqs, cpu = model
    lm, _ = check.load_lm(folder, DEVICE, dtype, **({} if dtype == 'bfloat16-autocast' else {'recheck_margin': 1.0}))
    greedy = lm.generate(reqs['greedy'])
    alone = [generate_alone(lm, r)[0] for r in reqs['greedy']]
    cs = score_choices(lm, reqs['decisions'])
    before = check.compare_scores(cpu.scores, [list(x) for x in cs.first_pass])
    after = check.compare_scores(cpu.scores, cs.scores)
    _report({'model': kind, 'device': DEVICE, 'dtype': dtype, 'max_abs_delta': before['max_abs_delta'],
             'nonfinite_first_pass': before['nonfinite'], 'nonfinite_after': after['nonfinite'],
             'flips_before': before['flips'], 'flips_after': after['flips'],
             'share_rechecked': len(cs.rechecked) / len(cs.scores),
             'engine_eq_generate_alone': sum(a.text == b.text for a, b in zip(greedy, alone)),
             'greedy': len(greedy), 'counters': {k: v for k, v in lm.counters.items() if 'nonfinite' in k}})
    # the re-check scores in float32, so a re-checked decision is the CPU's (near-ties aside)
    keep = set(_clear(cpu.scores))
    ref, got = _decisions(cpu.scores), _decisions(cs.scores)
    assert [ref[i] for i in cs.rechecked if i in keep] == [got[i] for i in cs.rechecked if i in keep]
