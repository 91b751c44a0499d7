"""Low precision on the CPU, end to end: bf16 weights re-checked in a second pass with one copy of the weights
resident at a time, and float16 on a Gemma 3 whose residual overflows it writing no NaN.

The models are tiny, random and saved to folders (loaded by path, as a user's checkpoint is), over the SmolLM2 and
Gemma tokenizers that the offline model packages ship.
"""
import gc, json, math, weakref

import pytest

torch = pytest.importorskip('torch')


def _save(model, tok, folder):
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope='module')
def llama_dir(tmp_path_factory):
    "A seeded 2-layer Llama over SmolLM2's tokenizer, saved to a folder."
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from wordbench.resources import materialise_local_model
    tok = AutoTokenizer.from_pretrained(materialise_local_model('smollm2-135m'))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, num_key_value_heads=2, vocab_size=len(tok),
                                         hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                         max_position_embeddings=512))
    return _save(model, tok, tmp_path_factory.mktemp('llama'))


@pytest.fixture(scope='module')
def overflowing_gemma_dir(tmp_path_factory):
    "A seeded Gemma 3 whose feed-forward output norm gain of 1e5 sends the residual past float16's 65504."
    from transformers import AutoTokenizer, Gemma3TextConfig, Gemma3ForCausalLM
    from wordbench.resources import materialise_local_model
    tok = AutoTokenizer.from_pretrained(materialise_local_model('gemma3-270m'))
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(Gemma3TextConfig(
        num_hidden_layers=2, num_key_value_heads=1, head_dim=16, sliding_window=8, vocab_size=len(tok),
        hidden_size=64, intermediate_size=128, num_attention_heads=4, max_position_embeddings=512,
        layer_types=['sliding_attention', 'full_attention']))
    with torch.no_grad(): model.model.layers[0].post_feedforward_layernorm.weight.fill_(1e5)
    return _save(model, tok, tmp_path_factory.mktemp('gemma3'))


def _pairs():
    from wordbench.models.lm import LoglikelihoodRequest
    frames = ('The box would not fit on the shelf because the', 'After the rain the children ran to the',
              'She said that the answer to the riddle was the')
    counting = (LoglikelihoodRequest('One, two,', ' three'), LoglikelihoodRequest('One, two,', ' four'))
    return [tuple(LoglikelihoodRequest(f, c) for c in (' box was too big.', ' shelf was too big.', ' garden.'))
            for f in frames] + [counting]


def test_bf16_second_pass_one_copy(llama_dir, monkeypatch, tmp_path):
    "bf16 weights: decisions equal to the float32 run, the share re-checked counted, never two copies resident."
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp_path))   # a fresh calibration store
    import wordbench.models.hf as lm_hf
    from wordbench.models.lm import get_lm
    from wordbench.evaluate.choices import score_choices, decide
    loaded, alive_at_load = [], []
    real = lm_hf._load_causal
    def load(*a, **k):
        gc.collect()
        alive_at_load.append(sum(r() is not None for r in loaded))   # weights still resident when the next loads
        model, tok = real(*a, **k)
        loaded.append(weakref.ref(model))
        return model, tok
    monkeypatch.setattr(lm_hf, '_load_causal', load)
    fp32 = score_choices(get_lm('hf', llama_dir), _pairs())
    alive_at_load.clear()
    low = get_lm('hf', llama_dir, dtype='bfloat16')
    assert low.recheck_policy == 'auto' and low.identity().endswith(':bfloat16:recheck=auto')
    got = score_choices(low, _pairs())
    assert [decide(s) for s in got.scores] == [decide(s) for s in fp32.scores]
    assert low.counters['decisions'] == len(_pairs()) and low.counters['rechecked'] == len(got.rechecked)
    assert alive_at_load and max(alive_at_load) == 0, alive_at_load   # a load never found other weights resident
    margin = json.loads((tmp_path/'recheck_margins.json').read_text())[low.identity()]
    assert margin >= 0.05
    print(f'bf16: {len(got.rechecked)} of {len(_pairs())} decisions re-checked at a calibrated {margin} nats')
    low.loglikelihood(list(_pairs()[0]))   # the bf16 copy back, after the fp32 one is freed
    assert max(alive_at_load) == 0 and low.exact().model is None


def test_float16_overflow_writes_no_nan(overflowing_gemma_dir, tmp_path, monkeypatch):
    "`wordbench score --dtype float16` on an overflowing Gemma 3: every answer finite, recomputed in float32."
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp_path/'cache'))
    from wordbench.models.lm import get_lm, LoglikelihoodRequest, TopKRequest
    f16 = get_lm('hf', overflowing_gemma_dir, dtype='float16')
    raw = f16.model(torch.tensor([[2, 651, 3207]])).logits   # the overflow is real: float16 alone gives NaN
    assert not torch.isfinite(raw).all()
    reqs = [LoglikelihoodRequest('The cat sat on the', ' mat'), LoglikelihoodRequest('One, two,', ' three')]
    assert all(math.isfinite(lp) for lp, _ in f16.loglikelihood(reqs))
    assert f16.counters['nonfinite'] == 2 and f16.counters['nonfinite_rechecked'] == 2
    assert all(t.words for t in f16.topk([TopKRequest('The cat sat on the', k=3)]))
    from wordbench.cli import main
    src, out = tmp_path/'in.jsonl', tmp_path/'out.jsonl'
    lines = [{'context': r.context, 'continuation': r.continuation} for r in reqs]
    lines += [{'prompt': 'The cat sat', 'max_tokens': 4}, {'prompt': 'Once', 'max_tokens': 3, 'temperature': 0.8}]
    src.write_text(''.join(json.dumps(x) + '\n' for x in lines))
    assert main(['score', '--model', overflowing_gemma_dir, '--dtype', 'float16', '--no-cache',
                 '--input', str(src), '--output', str(out)]) == 0
    answers = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(answers) == 4 and not any(a.get('error') for a in answers)
    assert 'nan' not in out.read_text().lower()
    ref = get_lm('hf', overflowing_gemma_dir).loglikelihood(reqs)
    for a, (lp, _) in zip(answers, ref): assert abs(a['logprob'] - lp) < 1e-4


def test_float32_nonfinite_is_a_failure(overflowing_gemma_dir):
    "Where no float32 copy exists (a float16 model object), a non-finite score is an `LMFailure`, never a number."
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from wordbench.models.lm import get_lm, LMFailure, LoglikelihoodRequest, GenerateRequest
    model = AutoModelForCausalLM.from_pretrained(overflowing_gemma_dir, dtype=torch.float16)
    lm = get_lm('hf', model, tokenizer=AutoTokenizer.from_pretrained(overflowing_gemma_dir))
    res = lm.loglikelihood([LoglikelihoodRequest('The cat sat on the', ' mat')])
    assert isinstance(res[0], LMFailure) and 'non-finite' in res[0].error
    gen = lm.generate([GenerateRequest(prompt='The cat', max_tokens=3, temperature=0.7, seed=1)])
    assert isinstance(gen[0], LMFailure) and 'non-finite' in gen[0].error
