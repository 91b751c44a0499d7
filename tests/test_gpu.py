"""The `hf` backend on a CUDA device against the CPU in float32, on tiny random Llama and Gemma 3 models.

Marked `gpu`: without a CUDA device every test skips with the reason "no CUDA device". The models are built from
configs here (seeded, no weights to copy) over the offline SmolLM2 and Gemma tokenizers, saved to a folder and
loaded by name, so the fp32 re-check of low-precision weights loads them again as a user's model would be.
"""
import pytest

torch = pytest.importorskip('torch')
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason='no CUDA device')]

FP32_TOL = 1e-3   # nats: CUDA fp32 vs CPU fp32 (the H200 check of 2026-11-27 measured at most 6.1e-05)
LOWP_TOL = 1.0    # nats: bf16/fp16 weights vs CPU fp32 (the H200 check measured at most 0.66 for bf16)
SHOTS = 'The city councilmen refused the demonstrators a permit because they feared violence.\n\n'


def _build(arch: str, folder):
    "A seeded tiny Llama or Gemma 3 text model over a local tokenizer, saved to `folder` (its path)."
    from transformers import (AutoTokenizer, LlamaConfig, LlamaForCausalLM, Gemma3TextConfig, Gemma3ForCausalLM)
    from wordbench.resources import materialise_local_model
    tok = AutoTokenizer.from_pretrained(materialise_local_model('smollm2-135m' if arch == 'llama' else 'gemma3-270m'))
    torch.manual_seed(0)
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  max_position_embeddings=1024)
    if arch == 'llama': model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, num_key_value_heads=2, **common))
    else: model = Gemma3ForCausalLM(Gemma3TextConfig(
        num_hidden_layers=3, num_key_value_heads=1, head_dim=16, sliding_window=6, final_logit_softcapping=30.0,
        layer_types=['sliding_attention', 'full_attention', 'sliding_attention'], **common))
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope='module', params=['llama', 'gemma3'])
def model_dir(request, tmp_path_factory):
    return _build(request.param, tmp_path_factory.mktemp(request.param))


def _requests():
    from wordbench.lm import LoglikelihoodRequest
    pairs = []
    for ctx in ('The trophy did not fit in the suitcase because the', 'Paris is the capital of', 'One, two,'):
        pairs.append(tuple(LoglikelihoodRequest(SHOTS + ctx, c) for c in (' trophy was big.', ' suitcase was big.')))
    return pairs


def _lm(folder, device='cpu', dtype='float32', **kw):
    from wordbench.lm import get_lm
    return get_lm('hf', folder, device=device, dtype=dtype, **kw)


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16-weights', 'float16'])
def test_scores_and_decisions(model_dir, dtype):
    "Scores within the tolerance; decisions identical to the CPU's after the fp32 re-check on the same device."
    from wordbench.choices import score_choices
    from wordbench.lm_hf import WEIGHTS_RECHECK_MARGIN
    pairs = _requests()
    cpu = score_choices(_lm(model_dir), pairs)
    gpu_lm = _lm(model_dir, 'cuda', dtype, recheck_margin=0 if dtype == 'float32' else WEIGHTS_RECHECK_MARGIN)
    assert gpu_lm.identity().endswith(':cuda')
    gpu = score_choices(gpu_lm, pairs)
    tol = FP32_TOL if dtype == 'float32' else LOWP_TOL
    for a, b in zip(sum(cpu.scores, []), sum(gpu.first_pass, [])): assert abs(a[0] - b[0]) <= tol, (a, b)
    decide = lambda s: [max(range(len(x)), key=lambda i: x[i][0]) for x in s]
    assert decide(cpu.scores) == decide(gpu.scores)


def test_topk_lists(model_dir):
    "The top-k words on CUDA fp32 are the CPU's, in the same order."
    from wordbench.lm import TopKRequest
    asks = [TopKRequest(SHOTS + 'The capital of France is', k=5), TopKRequest('A robin is a', k=5)]
    words = lambda lm: [[w for w, _ in t.words] for t in lm.topk(asks)]
    assert words(_lm(model_dir)) == words(_lm(model_dir, 'cuda'))


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16-weights', 'float16'])
def test_greedy_engine_equals_generate(model_dir, dtype):
    "Greedy answers of the decoding engine equal `model.generate`'s on the same device and dtype."
    from wordbench.lm import GenerateRequest
    from wordbench.lm_hf import generate_alone
    lm = _lm(model_dir, 'cuda', dtype)
    reqs = [GenerateRequest(prompt=p, max_tokens=8) for p in ('A robin is a', 'A robin is a kind of', 'Once')]
    batched = lm.generate(reqs)
    assert [g.text for g in batched] == [generate_alone(lm, r)[0].text for r in reqs]
    if dtype == 'float32': assert [g.text for g in batched] == [g.text for g in _lm(model_dir).generate(reqs)]


def test_peak_memory_within_sizing(model_dir):
    "With `batch_size='auto'` the peak memory of scoring stays within the free memory the sizing started from."
    lm = _lm(model_dir, 'cuda', batch_size='auto')
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    lm.loglikelihood(sum(map(list, _requests()), []) * 50)
    assert torch.cuda.max_memory_allocated() - start <= lm.free_bytes
