#!/usr/bin/env python
"""wordbench's `hf` backend on one CUDA GPU against CPU float32: the check of review-scale-5 §5 (sections S0-S9).

Needs only torch and transformers (plus fastcore, tenacity and platformdirs, carried as wheels; see run.sh). Nothing
is downloaded: a byte-level BPE tokenizer is trained here and small random models are built from configs, saved to
folders and loaded by path, as a user's model would be. Each section is timed and recorded; `gpu_check.json` and
`gpu_check.md` are rewritten after every section, so a run cut short still reports what it did. Figures are
reported, not judged, except the few marked `expect_*`, whose value says whether the expectation held.

  python tests/gpu/check.py                      # on the GPU machine (about 9 minutes with --budget-s 540)
  python tests/gpu/check.py --cpu-only --quick   # smoke run anywhere: S0-S2 run, the CUDA sections are skipped
  python tests/gpu/check.py --target cpu --quick # developers: S3, S4, S7 and S9 compare the CPU with itself
"""
from __future__ import annotations
import argparse, gc, importlib.metadata, json, math, os, platform, random, subprocess, sys, tempfile, time, traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path: sys.path.insert(0, str(REPO))
os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')

FORMAT = 'wordbench-gpu-check/2'   # the JSON layout; nbs/analysis/gpu_check.ipynb reads it (and the first layout)
FP32_TOL = 1e-4                    # nats: CUDA fp32 against CPU fp32 (the H200 run of 2026-11-27 measured 6.1e-05)
FP16_MAX = 65504.0
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<eos>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
# (name, plan seconds on an H200, needs a target device other than the reference CPU, needs CUDA itself)
SECTIONS = [('S0_environment', 5, False, False), ('S1_models', 20, False, False),
            ('S2_cpu_reference', 40, False, False), ('S3_precision', 180, True, False),
            ('S4_attention', 20, True, False), ('S5_oom', 120, True, True), ('S6_device_map', 30, True, True),
            ('S7_shards', 30, True, False), ('S8_throughput', 60, True, True), ('S9_identity', 10, True, False)]


def log(*a):
    print(time.strftime('%H:%M:%S'), *a, flush=True)


@dataclass
class Ctx:
    "What the sections share: options, the tokenizer, model folders, requests and the CPU reference."
    args: argparse.Namespace
    out: Path
    tmp: Path
    target: str | None                      # 'cuda', or 'cpu' with --target cpu; None with --cpu-only
    start: float = field(default_factory=time.time)
    report: dict = field(default_factory=dict)
    tok: object = None
    models: dict = field(default_factory=dict)       # name -> folder
    reqs: dict = field(default_factory=dict)         # decisions, ids, topk, greedy, sampled
    ref: dict = field(default_factory=dict)          # model name -> CPU fp32 results
    identities: dict = field(default_factory=dict)   # configuration -> identity
    big: Path | None = None                          # S5/S8's ~1B model folder

    def left(self) -> float: return self.args.budget_s - (time.time() - self.start)


# ------------------------------------------------------------------------------------------------------- helpers
def free():
    gc.collect()
    import torch
    if torch.cuda.is_available(): torch.cuda.empty_cache()


def sync():
    import torch
    if torch.cuda.is_available(): torch.cuda.synchronize()


def timed(fn, *a, **k):
    "`(fn(*a, **k), seconds)`, the GPU synchronised before and after."
    sync()
    t0 = time.perf_counter()
    out = fn(*a, **k)
    sync()
    return out, time.perf_counter() - t0


def peak_mib(reset=False):
    import torch
    if not torch.cuda.is_available(): return None
    if reset:
        torch.cuda.reset_peak_memory_stats()
        return None
    return torch.cuda.max_memory_allocated() / 2**20


def finite(x) -> bool: return isinstance(x, (int, float)) and math.isfinite(x)


def new_api() -> bool:
    "Whether the backend takes the dtype vocabulary float32/bfloat16/float16/bfloat16-autocast."
    from wordbench.models import hf as lm_hf
    return 'bfloat16-autocast' in getattr(lm_hf, 'HF_DTYPES', {})


def dtype_option(dtype: str) -> str:
    "`dtype` as the installed backend spells it (before the rename: bfloat16 = autocast, bfloat16-weights = weights)."
    if dtype == 'float32' or new_api(): return dtype
    return {'bfloat16': 'bfloat16-weights', 'bfloat16-autocast': 'bfloat16', 'float16': 'float16'}[dtype]


def load_lm(folder, device: str, dtype: str = 'float32', attn: str | None = None, **kw):
    "`(lm, how)`: `get_lm('hf', folder, ...)`; with `attn`, the option, or a model loaded with it (fp32, one device)."
    from wordbench.models.lm import get_lm, BackendOptionError
    if attn is None: return get_lm('hf', str(folder), device=device, dtype=dtype_option(dtype), **kw), 'path'
    try: return get_lm('hf', str(folder), device=device, dtype=dtype_option(dtype), attn_implementation=attn,
                       **kw), 'attn_implementation option'
    except BackendOptionError:
        if dtype != 'float32': raise
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attn, dtype=torch.float32).to(device)
    return get_lm('hf', model, tokenizer=AutoTokenizer.from_pretrained(folder), **kw), 'model object'


def note_identity(ctx, config: str, lm, model: str, devices: str | None = None):
    "Record `lm`'s identity under `config`, with what it computes: model, devices, precision, attention."
    computes = f'{model} {devices or lm.device.type} {lm.dtype} {attn_of(lm)}'
    ctx.identities[config] = {'identity': lm.identity(), 'computes': computes}


def attn_of(lm) -> str | None: return getattr(lm.model.config, '_attn_implementation', None)


def weights_dtype(lm) -> str: return str(next(lm.model.parameters()).dtype).replace('torch.', '')


def decisions_of(scores) -> list:
    from wordbench.evaluate.choices import decide
    return [decide(s) for s in scores]


def compare_scores(ref: list, out: list) -> dict:
    "Per-request |Δ log-prob| over finite pairs, the non-finite count, and the decisions that differ."
    a = [x[0] for d in ref for x in d]
    b = [x[0] if isinstance(x, tuple) else float('nan') for d in out for x in d]
    deltas = [abs(x - y) for x, y in zip(a, b) if finite(x) and finite(y)]
    da, db = decisions_of(ref), decisions_of(out)
    flips = [i for i, (x, y) in enumerate(zip(da, db)) if x != y]
    margin = lambda d: (lambda s: s[0] - s[1])(sorted((x[0] for x in d), reverse=True))
    return {'requests': len(a), 'decisions': len(ref), 'nonfinite': sum(not finite(y) for y in b),
            'max_abs_delta': max(deltas, default=None), 'mean_abs_delta': sum(deltas) / len(deltas) if deltas else None,
            'flips': len(flips), 'largest_ref_margin_flipped': max((margin(ref[i]) for i in flips), default=0.0)}


def compare_topk(ref, out) -> dict:
    top1 = sum(bool(r.words) and bool(o.words) and r.words[0][0] == o.words[0][0] for r, o in zip(ref, out))
    ranks = [rt[1] == ot[1] for r, o in zip(ref, out) for rt, ot in zip(r.targets, o.targets)]
    return {'requests': len(ref), 'top1_equal': top1, 'target_rank_equal': sum(ranks), 'targets': len(ranks)}


def same_texts(a, b) -> list: return [sum(x.text == y.text for x, y in zip(a, b)), len(a)]


def ratio(pair) -> str: return '%d/%d' % tuple(pair) if isinstance(pair, (list, tuple)) else str(pair)


# --------------------------------------------------------------------------------------------- tokenizer, models
def corpus(n_min: int = 600) -> tuple[list[str], list[str]]:
    "`(lines, words)`: text from the repository's README and site pages (words padded with made-up ones)."
    import re
    files = [REPO/'README.md'] + sorted((REPO/'nbs'/'site').glob('*.md'))[:6]
    text = '\n'.join(f.read_text(encoding='utf-8') for f in files if f.exists())
    lines = [ln for ln in text.splitlines() if ln.strip()] or ['the quick brown fox jumps over the lazy dog']
    words = sorted(set(re.findall(r'\b[a-z]{3,10}\b', text.lower())))
    return lines, words + [f'zq{i}' for i in range(max(0, n_min - len(words)))]


def build_tokenizer(folder: Path, lines: list[str], vocab: int):
    "A byte-level BPE tokenizer trained on `lines`: BOS added to every encoding, a chat template; saved to `folder`."
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=vocab, show_progress=False,
                            special_tokens=['<bos>', '<eos>', '<pad>', '<unk>'])
    core = bpe._tokenizer
    core.post_processor = processors.TemplateProcessing(
        single='<bos> $A', pair='<bos> $A <bos> $B', special_tokens=[('<bos>', core.token_to_id('<bos>'))])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token='<bos>', eos_token='<eos>', pad_token='<pad>',
                                  unk_token='<unk>')
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    return tok


def model_config(kind: str, vocab: int, ids: dict, quick: bool):
    "The config of a random test model: llama-s, gemma3-s, gemma2-s, qwen2-s, or llama-1b."
    h, inter, heads = (64, 128, 4) if quick else (256, 768, 4)
    common = dict(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_attention_heads=heads,
                  num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=False, **ids)
    if kind == 'llama-s':
        from transformers import LlamaConfig
        return LlamaConfig(num_hidden_layers=4, **common)
    if kind == 'gemma3-s':   # 5 sliding layers and 1 full one, a 64-token window, logit soft-capping
        from transformers import Gemma3TextConfig
        return Gemma3TextConfig(num_hidden_layers=6, head_dim=h // heads, query_pre_attn_scalar=h // heads,
                                sliding_window=64, final_logit_softcapping=30.0,
                                layer_types=['sliding_attention'] * 5 + ['full_attention'], **common)
    if kind == 'gemma2-s':   # transformers loads Gemma 2 with eager attention
        from transformers import Gemma2Config
        return Gemma2Config(num_hidden_layers=4, head_dim=h // heads, query_pre_attn_scalar=h // heads,
                            sliding_window=64, final_logit_softcapping=30.0, attn_logit_softcapping=50.0, **common)
    if kind == 'qwen2-s':    # a sliding window in the config that the model does not use
        from transformers import Qwen2Config
        return Qwen2Config(num_hidden_layers=4, sliding_window=32, use_sliding_window=False, **common)
    if kind == 'llama-1b':   # ~1B parameters, a 128k vocabulary (tied), for memory and throughput
        from transformers import LlamaConfig
        dims = (dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2) if quick else
                dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8))
        return LlamaConfig(vocab_size=131072, max_position_embeddings=4096, tie_word_embeddings=True, **ids, **dims)
    raise ValueError(kind)


def peak_head(model, tok_vocab: int, logit_std: float = 6.0):
    "Scale the output head so next-token distributions are peaked as a trained model's are; rows past the tokenizer 0."
    import torch
    with torch.no_grad():
        w = model.get_output_embeddings().weight
        w.mul_(logit_std / (float(w[:tok_vocab].float().std()) * math.sqrt(w.shape[1])))
        w[tok_vocab:] = 0


def mlp_peak(model, ids) -> float:
    "Largest |activation| entering any MLP down-projection of `model` on the token ids `ids`."
    import torch
    top = [0.0]
    hooks = [m.register_forward_hook(lambda mod, inp, out: top.append(float(inp[0].float().abs().max())))
             for n, m in model.named_modules() if n.endswith('mlp.down_proj')]
    with torch.inference_mode(): model(torch.as_tensor([ids], device=model.device))
    for h in hooks: h.remove()
    return max(top)


def fp16_overflow_gains(model, layers=(1, 3), gain: float = 60.0, over: float = 4.0) -> dict:
    "Scale two pre-MLP RMSNorm gains of a Gemma model (x60, more if needed) until its MLP passes fp16's maximum (F2)."
    import torch
    ids = torch.randint(4, model.config.vocab_size, (300,), generator=torch.Generator().manual_seed(1)).tolist()
    def set_gain(g):
        with torch.no_grad():
            for i in layers: model.model.layers[i].pre_feedforward_layernorm.weight.fill_(g - 1)   # x (1 + weight)
    set_gain(gain)
    peak = mlp_peak(model, ids)
    if peak < over * FP16_MAX:   # the MLP's inner activations grow with the square of the gain
        gain *= math.sqrt(over * FP16_MAX / peak)
        set_gain(gain)
    return {'norms': [f'model.layers.{i}.pre_feedforward_layernorm' for i in layers], 'gain': gain,
            'fp32_mlp_peak_random_ids': mlp_peak(model, ids)}


def build_model(kind: str, folder: Path, tok, quick: bool, device: str = 'cpu', dtype=None) -> dict:
    "Save a seeded random `kind` model with `tok` in `folder`; returns a description."
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg = model_config(kind, len(tok), ids, quick)
    with torch.device(device): model = AutoModelForCausalLM.from_config(cfg, dtype=dtype or torch.float32)
    peak_head(model, len(tok))
    info = {'kind': kind, 'arch': type(model).__name__, 'params': sum(p.numel() for p in model.parameters()),
            'hidden': cfg.hidden_size, 'layers': cfg.num_hidden_layers, 'vocab': cfg.vocab_size,
            'layer_types': getattr(cfg, 'layer_types', None), 'sliding_window': getattr(cfg, 'sliding_window', None)}
    if kind == 'gemma3-s': info['scaled_gains'] = fp16_overflow_gains(model)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    del model
    free()
    return info


# ------------------------------------------------------------------------------------------------------ requests
def make_requests(words: list[str], quick: bool, seed: int = 0) -> dict:
    "Decisions sharing 5-shot prefixes (some rows past the sliding windows), top-k, greedy and seeded requests."
    from wordbench.models.lm import LoglikelihoodRequest as L, TopKRequest, GenerateRequest
    rng = random.Random(seed)
    sent = lambda n: ' '.join(rng.choice(words) for _ in range(n)) + '.'
    lengths = (3, 6, 10, 18) if quick else (6, 12, 24, 48)   # words per shot: rows of ~40 to ~600 tokens
    shots = [' '.join(sent(rng.randint(n // 2, n)) for _ in range(5)) + '\n\n' for n in lengths]
    n_dec = 12 if quick else 150
    decisions = []
    for i in range(n_dec):
        pre, a, b, c = shots[i % len(shots)], *rng.sample(words, 3)
        if i % 3 == 0:   # WinoDict-style: the option in the context, one shared continuation
            tail = ' ' + ' '.join(rng.choice(words) for _ in range(rng.randint(2, 6))) + '.'
            decisions.append([L(f'{pre}The {a} {b} the {opt} because', tail) for opt in (a, c)])
        else:            # multiple choice: one context, 2-4 continuations of 1-8 words
            ctx = f'{pre}Question: what is a {a}? Answer:'
            decisions.append([L(ctx, ' ' + ' '.join(rng.sample(words, rng.randint(1, 8))))
                              for _ in range(rng.randint(2, 4))])
    decisions.append([L('', ' the ' + words[0]), L('', ' a ' + words[1])])   # empty context: BOS conditions
    ids = [f'item-{rng.randrange(10**6):06d}-{i}' for i in range(len(decisions))]
    topk = [TopKRequest(f'{rng.choice(shots)}The {rng.choice(words)} is', k=20, targets=(rng.choice(words),))
            for _ in range(4 if quick else 20)]
    system = shots[2]
    n = 6 if quick else 24
    m = 8 if quick else 24   # new tokens at most
    greedy = [GenerateRequest(messages=(('system', system), ('user', f'Define {w}.')), max_tokens=m)
              for w in rng.sample(words, n // 3)]
    greedy += [GenerateRequest(prompt=f'{shots[1]}The {w}', max_tokens=m, stop=('.', '\n'))
               for w in rng.sample(words, n // 3)]
    greedy += [GenerateRequest(prompt=sent(5), max_tokens=m // 2) for _ in range(n - len(greedy))]
    sampled = [GenerateRequest(prompt=f'{shots[0]}{w}', max_tokens=m, temperature=0.8, top_p=0.9, seed=s)
               for s, w in enumerate(rng.sample(words, 2 if quick else 8))]
    return {'decisions': decisions, 'ids': ids, 'topk': topk, 'greedy': greedy, 'sampled': sampled}


# ---------------------------------------------------------------------------------------------------- sections
def s0_environment(ctx: Ctx) -> dict:
    import torch, transformers
    env = {'python': platform.python_version(), 'torch': torch.__version__, 'torch_cuda': torch.version.cuda,
           'transformers': transformers.__version__, 'cuda_available': torch.cuda.is_available(),
           'cpu_threads': torch.get_num_threads(), 'float32_matmul_precision': torch.get_float32_matmul_precision(),
           'cuda_matmul_allow_tf32': torch.backends.cuda.matmul.allow_tf32,
           'cudnn_allow_tf32': torch.backends.cudnn.allow_tf32, 'target': ctx.target,
           'backend_dtype_vocabulary': 'float32/bfloat16/float16/bfloat16-autocast' if new_api()
           else 'before the rename (bfloat16 = autocast, bfloat16-weights): mapped by dtype_option'}
    for m in ('tokenizers', 'accelerate', 'fastcore', 'tenacity', 'platformdirs', 'safetensors'):
        try: env[m] = importlib.metadata.version(m)
        except Exception as e: env[m] = f'missing: {type(e).__name__}'
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), gpu_mem_gib=p.total_memory / 2**30,
                   bf16_supported=torch.cuda.is_bf16_supported(),
                   sdpa_flash=torch.backends.cuda.flash_sdp_enabled(),
                   sdpa_mem_efficient=torch.backends.cuda.mem_efficient_sdp_enabled(),
                   sdpa_math=torch.backends.cuda.math_sdp_enabled(),
                   sdpa_cudnn=getattr(torch.backends.cuda, 'cudnn_sdp_enabled', lambda: None)())
    from wordbench.models.hf_kernels import internals_missing
    env['internals_missing'] = internals_missing()
    env['expect_internals_present'] = env['internals_missing'] == []
    import wordbench
    env['wordbench'] = getattr(wordbench, '__version__', '?')
    try: env['git_commit'] = subprocess.run(['git', '-C', str(REPO), 'rev-parse', '--short', 'HEAD'],
                                            capture_output=True, text=True, timeout=10).stdout.strip() or None
    except Exception: env['git_commit'] = None
    return env


def s1_models(ctx: Ctx) -> dict:
    lines, words = corpus()
    ctx.reqs = make_requests(words, ctx.args.quick)
    ctx.tok = build_tokenizer(ctx.tmp/'tokenizer', lines * 2, vocab=1024 if ctx.args.quick else 4096)
    out = {'tokenizer_vocab': len(ctx.tok), 'bos_added': ctx.tok('a b')['input_ids'][0] == ctx.tok.bos_token_id,
           'models': {}}
    from transformers import AutoConfig
    for kind in ('llama-s', 'gemma3-s', 'gemma2-s', 'qwen2-s'):
        folder = ctx.tmp/kind
        (info, s) = timed(build_model, kind, folder, ctx.tok, ctx.args.quick)
        info['build_s'] = s
        ctx.models[kind] = folder
        from wordbench.models.lm import get_lm
        lm = get_lm('hf', str(folder))   # loaded by path, as a user's folder is
        info['attn_implementation'] = attn_of(lm)
        del lm
        info['config_type'] = type(AutoConfig.from_pretrained(folder)).__name__
        out['models'][kind] = info
    import torch
    from transformers import AutoModelForCausalLM
    gemma = AutoModelForCausalLM.from_pretrained(ctx.models['gemma3-s'], dtype=torch.float32).eval()
    peak = mlp_peak(gemma, ctx.tok(ctx.reqs['decisions'][3][0].context)['input_ids'][:600])
    del gemma
    out['gemma3_fp32_mlp_peak'] = peak
    out['expect_gemma3_overflows_fp16'] = peak > FP16_MAX
    return out


def reference_run(lm, reqs: dict, n_alone: int, first_pass: bool = True) -> dict:
    "Everything a backend computes on the check's requests (in an order safe for a second-pass re-check)."
    from wordbench.evaluate.choices import score_choices
    from wordbench.models.hf import generate_alone
    res = {}
    res['topk'], res['topk_s'] = timed(lm.topk, reqs['topk'], progress=False)
    gen0 = lm.counters['generated_tokens']
    res['greedy'], res['greedy_s'] = timed(lm.generate, reqs['greedy'], progress=False)
    res['gen_tok_per_s'] = (lm.counters['generated_tokens'] - gen0) / res['greedy_s']
    res['alone'] = [generate_alone(lm, r)[0] for r in reqs['greedy'][:n_alone]]
    flat = sorted({r for d in reqs['decisions'] for r in d}, key=lambda r: (r.context, r.continuation))
    if first_pass: res['first_pass_s'] = timed(lm.loglikelihood, flat, progress=False)[1]
    peak_mib(reset=True)
    res['choices'], res['choices_s'] = timed(score_choices, lm, reqs['decisions'])
    res['choices_peak_mib'] = peak_mib()
    return res


def s2_cpu_reference(ctx: Ctx) -> dict:
    out = {}
    n_alone = 2 if ctx.args.quick else 8
    for kind, folder in ctx.models.items():
        lm, _ = load_lm(folder, 'cpu', batch_size=16)
        r = reference_run(lm, ctx.reqs, n_alone, first_pass=False)
        r['sampled'], r['sampled_s'] = timed(lm.generate, ctx.reqs['sampled'], progress=False)
        ctx.ref[kind] = r
        note_identity(ctx, f'{kind} cpu float32', lm, kind)
        out[kind] = {'decisions': len(ctx.reqs['decisions']), 'requests': sum(map(len, ctx.reqs['decisions'])),
                     'longest_row_tokens': max(len(ctx.tok(q.context + q.continuation)['input_ids'])
                                               for d in ctx.reqs['decisions'] for q in d),
                     'nonfinite': compare_scores(r['choices'].scores, r['choices'].scores)['nonfinite'],
                     'topk': len(r['topk']), 'greedy': len(r['greedy']), 'sampled': len(r['sampled']),
                     'engine_eq_generate_alone': same_texts(r['greedy'][:n_alone], r['alone']),
                     'attn_implementation': attn_of(lm), 'choices_s': r['choices_s'], 'greedy_s': r['greedy_s'],
                     'gen_tok_per_s': r['gen_tok_per_s'], 'counters': dict(lm.counters)}
        del lm
        free()
    return out


def sample_in_child(folder, device: str, dtype: str, timeout: float) -> dict:
    "The sampled requests twice, in a fresh process: a device-side assert there cannot poison this one's CUDA context."
    cmd = [sys.executable, str(Path(__file__).resolve()), '--child-sample', str(folder), '--child-device', device,
           '--child-dtype', dtype, '--out', str(Path(folder)/'child')] + (['--quick'] if _ARGS.quick else [])
    try: p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired: return {'error': f'timed out after {timeout:.0f} s'}
    last = [ln for ln in p.stdout.splitlines() if ln.startswith('{')]
    if p.returncode or not last: return {'error': f'exit {p.returncode}: ' + (p.stderr or p.stdout)[-800:]}
    return json.loads(last[-1])


def sample_twice(lm, sampled) -> dict:
    "Sampled replies twice with the same seeds: whether they run, and whether the texts repeat."
    a, s = timed(lm.generate, sampled, progress=False)
    b = lm.generate(sampled, progress=False)
    return {'texts': [g.text for g in a], 'same_seed_same_text': same_texts(a, b), 's': s}


def has_nonfinite_logits(lm, sampled) -> bool:
    "Whether the model gives a non-finite logit on any sampled prompt (then sampling runs in a child process)."
    import torch
    with torch.inference_mode():
        for r in sampled:
            ids = lm.tokenizer(r.prompt, return_tensors='pt')['input_ids'].to(lm.device)
            if not torch.isfinite(lm.model(ids).logits).all(): return True
    return False


def s3_precision(ctx: Ctx) -> dict:
    configs = [('float32', {}), ('bfloat16', {'recheck_margin': 1.0}), ('float16', {'recheck_margin': 1.0}),
               ('bfloat16-autocast', {}), ('bfloat16', {'recheck_margin': 'auto'})]
    n_alone = 2 if ctx.args.quick else 8
    rows, reserve = [], 200 if not ctx.args.quick else 5   # seconds kept for S4-S9
    ctx.report['sections']['S3_precision'] = {'status': 'running', 'result': {'rows': rows}}   # partial rows shown
    for kind, folder in ctx.models.items():
        if ctx.args.s3_models and kind not in ctx.args.s3_models: continue
        ref = ctx.ref[kind]
        for dtype, kw in configs:
            row = {'model': kind, 'config': f'{ctx.target} {dtype}' + ''.join(f' {k}={v}' for k, v in kw.items())}
            rows.append(row)
            if ctx.left() < reserve:
                row['error'] = 'not run: time budget'
                continue
            try:
                peak_mib(reset=True)
                (lm, _), load_s = timed(load_lm, folder, ctx.target, dtype, batch_size=16, **kw)
                row.update(load_s=load_s, weights=weights_dtype(lm), attn=attn_of(lm), identity=lm.identity(),
                           recheck_policy=getattr(lm, 'recheck_policy', None), load_peak_mib=peak_mib())
                note_identity(ctx, f"{kind} {row['config']}", lm, kind)
                if dtype == 'float16' and has_nonfinite_logits(lm, ctx.reqs['sampled']):
                    smp = sample_in_child(folder, ctx.target, dtype, timeout=max(30.0, min(90.0, ctx.left() / 4)))
                    smp['where'] = 'child process (non-finite logits)'
                else: smp = {**sample_twice(lm, ctx.reqs['sampled']), 'where': 'this process'}
                r = reference_run(lm, ctx.reqs, n_alone)
                cs, cpu = r['choices'], ref['choices'].scores
                before = compare_scores(cpu, [list(x) for x in cs.first_pass])
                after = compare_scores(cpu, cs.scores)
                rows[-1] = row = {**row, 'max_abs_delta': before['max_abs_delta'], 'mean_abs_delta':
                                  before['mean_abs_delta'], 'nonfinite_first_pass': before['nonfinite'],
                                  'nonfinite_after': after['nonfinite'], 'flips_before': before['flips'],
                                  'largest_ref_margin_flipped': before['largest_ref_margin_flipped'],
                                  'flips_after': after['flips'], 'recheck_margin': lm.recheck_margin,
                                  'rechecked': len(cs.rechecked),
                                  'share_rechecked': len(cs.rechecked) / len(cs.scores),
                                  'first_pass_s': r['first_pass_s'], 'choices_s': r['choices_s'],
                                  'recheck_overhead_s': r['choices_s'] - r['first_pass_s'],
                                  'choices_peak_mib': r['choices_peak_mib'],
                                  'topk': compare_topk(ref['topk'], r['topk']),
                                  'greedy_eq_cpu': same_texts(ref['greedy'], r['greedy']),
                                  'engine_eq_generate_alone': same_texts(r['greedy'][:n_alone], r['alone']),
                                  'gen_tok_per_s': r['gen_tok_per_s'],
                                  'sampling_ran': 'error' not in smp, 'sampling': smp,
                                  'sampled_eq_cpu': ([sum(t == g.text for t, g in zip(smp['texts'], ref['sampled'])),
                                                      len(ref['sampled'])] if 'texts' in smp else None),
                                  'counters': {k: v for k, v in dict(lm.counters).items()
                                               if k in ('oom_retries', 'nonfinite', 'nonfinite_rechecked',
                                                        'weights_reloaded', 'forward_calls', 'tokens_input',
                                                        'generated_tokens')}}
                # the backend recomputes non-finite results in float32 inside each call: its counters count them
                row['nonfinite_found'] = lm.counters.get('nonfinite', 0)
                row['nonfinite_recomputed'] = lm.counters.get('nonfinite_rechecked', 0)
                if dtype == 'float32':
                    row['expect_fp32_within_tol'] = before['max_abs_delta'] is not None and \
                        before['max_abs_delta'] <= FP32_TOL and before['nonfinite'] == 0
                    row['expect_fp32_decisions_equal'] = before['flips'] == 0
                del lm, r
            except Exception as e:
                row['error'] = f'{type(e).__name__}: {e}'[:600]
                row['traceback'] = traceback.format_exc()[-2500:]
            free()
            write_report(ctx)
    return {'rows': rows, 'tolerance_fp32': FP32_TOL}


def s4_attention(ctx: Ctx) -> dict:
    "Engine greedy text against `generate_alone` under eager and sdpa attention (F1: eager ignores bool masks)."
    from wordbench.models.hf import generate_alone
    reqs = ctx.reqs['greedy']
    rows = []
    for kind in ('llama-s', 'gemma2-s'):
        for attn in ('eager', 'sdpa'):
            row = {'model': kind, 'attn': attn}
            rows.append(row)
            try:
                lm, how = load_lm(ctx.models[kind], ctx.target, 'float32', attn=attn, batch_size=16)
                eng = lm.generate(reqs, progress=False)
                alone = [generate_alone(lm, r)[0] for r in reqs]
                row.update(loaded_via=how, attn_loaded=attn_of(lm), identity=lm.identity(),
                           engine_eq_generate_alone=same_texts(eng, alone),
                           engine_eq_cpu_engine=same_texts(eng, ctx.ref[kind]['greedy']),
                           alone_eq_cpu_alone=same_texts(alone[:len(ctx.ref[kind]['alone'])], ctx.ref[kind]['alone']))
                row['expect_engine_eq_generate_alone'] = row['engine_eq_generate_alone'][0] == len(reqs)
                note_identity(ctx, f'{kind} {ctx.target} float32 attn={attn}', lm, kind)
                del lm
            except Exception as e:
                row['error'] = f'{type(e).__name__}: {e}'[:600]
            free()
    return {'rows': rows}


def big_model(ctx: Ctx) -> Path:
    "S5's and S8's ~1B Llama (128k vocabulary), built on the GPU and saved in bf16, once."
    import torch
    if ctx.big is None:
        folder = ctx.tmp/'llama-1b'
        info, s = timed(lambda: build_model('llama-1b', folder, ctx.tok, ctx.args.quick, device='cuda',
                                            dtype=torch.bfloat16))
        ctx.report.setdefault('big_model', {**info, 'build_s': s})
        ctx.big = folder
    return ctx.big


def long_requests(ctx: Ctx, n: int, words: int, seed: int):
    from wordbench.models.lm import LoglikelihoodRequest as L
    _, vocab = corpus()
    rng = random.Random(seed)
    return [L(' '.join(rng.choice(vocab) for _ in range(words)), ' ' + ' '.join(rng.sample(vocab, 6)))
            for _ in range(n)]


def chats(ctx: Ctx, n: int, max_tokens: int):
    "`n` distinct chat requests (the check's chats with a numbered user turn)."
    base = [g for g in ctx.reqs['greedy'] if g.messages]
    numbered = lambda g, i: g.messages[:-1] + (('user', f'{g.messages[-1][1]} ({i})'),)
    return [replace(base[i % len(base)], max_tokens=max_tokens, messages=numbered(base[i % len(base)], i))
            for i in range(n)]


def s5_oom(ctx: Ctx) -> dict:
    "`auto` rows per width, peak against free memory; then a memory fraction that makes batch 256 run out of memory."
    import torch
    folder = big_model(ctx)
    out = {'model': ctx.report.get('big_model')}
    lm, _ = load_lm(folder, 'cuda', 'bfloat16', batch_size='auto', recheck_margin=0.0)
    cfg = lm.model.config.get_text_config()
    out['free_bytes_gib'] = (lm.free_bytes or 0) / 2**30
    try: out['auto_rows_per_width'] = {w: lm._batch_rows(w, 10**6) for w in (64, 256, 1024, 4096)}
    except Exception as e: out['auto_rows_per_width'] = f'{type(e).__name__}: {e}'
    reqs = long_requests(ctx, 64 if ctx.args.quick else 512, 300, seed=5)
    start = torch.cuda.memory_allocated()
    peak_mib(reset=True)
    _, s = timed(lm.loglikelihood, reqs, progress=False)
    used = torch.cuda.max_memory_allocated() - start
    out['auto_scoring'] = {'requests': len(reqs), 's': s, 'peak_over_start_gib': used / 2**30,
                           'share_of_free': used / lm.free_bytes if lm.free_bytes else None,
                           'oom_retries': lm.counters['oom_retries']}
    del lm
    free()
    gens = chats(ctx, 256, 24)
    # unconstrained references: batch 256 (what was asked) and, below, the batch the OOM retries settle on
    lm, _ = load_lm(folder, 'cuda', 'bfloat16', batch_size=256, recheck_margin=0.0, generate_batch_size=256,
                    generate_cache_mib=16384)
    weights = torch.cuda.memory_allocated()
    peak_mib(reset=True)
    free_scores = lm.loglikelihood(reqs, progress=False)
    extra_ll = peak_mib() * 2**20 - weights
    peak_mib(reset=True)
    free_texts = lm.generate(gens, progress=False)
    extra_gen = peak_mib() * 2**20 - weights
    del lm
    free()
    # a quarter of what 256 rows took beyond the weights: batch 256 fails, a quarter of it should fit
    headroom = max(64 * 2**20, min(extra_ll, extra_gen) / 4)
    out['unconstrained'] = {'weights_gib': weights / 2**30, 'scoring_extra_gib': extra_ll / 2**30,
                            'generate_extra_gib': extra_gen / 2**30, 'headroom_gib': headroom / 2**30}
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = (weights + headroom) / total
    out['memory_fraction'] = fraction
    try:
        torch.cuda.set_per_process_memory_fraction(fraction)
        lm, _ = load_lm(folder, 'cuda', 'bfloat16', batch_size=256, recheck_margin=0.0, generate_batch_size=256,
                        generate_cache_mib=16384)
        scores, s1 = timed(lm.loglikelihood, reqs, progress=False)
        retries_ll, cap = lm.counters['oom_retries'], lm.batch_cap
        texts, s2 = timed(lm.generate, gens, progress=False)
        out['constrained'] = {'scoring_s': s1, 'scoring_oom_retries': retries_ll, 'batch_cap': cap,
                              'generate_s': s2, 'generate_oom_retries': lm.counters['oom_retries'] - retries_ll,
                              'generate_rows_after': getattr(getattr(lm.engine, 'limits', None), 'batch_rows', None)}
        del lm
    except Exception as e:
        out['constrained_error'] = f'{type(e).__name__}: {e}'[:800]
        scores = texts = None
    finally:
        free()
        torch.cuda.set_per_process_memory_fraction(1.0)
    if scores is not None:
        d = [abs(a[0] - b[0]) for a, b in zip(free_scores, scores)]
        out['vs_unconstrained_bs256'] = {'max_abs_delta': max(d), 'equal_scores': sum(x == 0 for x in d),
                                         'requests': len(d), 'greedy_eq': same_texts(free_texts, texts)}
        cap = out['constrained'].get('batch_cap')
        if cap:   # the same batches without the retries: equal bit for bit
            lm, _ = load_lm(folder, 'cuda', 'bfloat16', batch_size=cap, recheck_margin=0.0)
            same = lm.loglikelihood(reqs, progress=False)
            out['vs_unconstrained_same_batch'] = {'batch': cap, 'equal_scores': sum(a == b for a, b in
                                                                                   zip(same, scores))}
            del lm
            free()
        out['expect_oom_retried'] = out['constrained']['scoring_oom_retries'] > 0 and \
            out['constrained']['generate_oom_retries'] > 0
    out['hidden_size'] = cfg.hidden_size
    return out


def s6_device_map(ctx: Ctx) -> dict:
    "llama-s split over the GPU and the CPU: lm_head on the CPU, so sampling's generator and logits differ (F10)."
    from transformers import AutoConfig
    n = AutoConfig.from_pretrained(ctx.models['llama-s']).num_hidden_layers
    dmap = {'model.embed_tokens': 0, 'model.rotary_emb': 0, 'model.norm': 'cpu', 'lm_head': 'cpu'}
    dmap.update({f'model.layers.{i}': 0 if i < n - 1 else 'cpu' for i in range(n)})
    lm, _ = load_lm(ctx.models['llama-s'], 'cuda', 'float32', device_map=dmap, batch_size=16)
    ref = ctx.ref['llama-s']
    out = {'device_map': {k: str(v) for k, v in dmap.items()}, 'identity': lm.identity(),
           'hf_device_map': {k: str(v) for k, v in (getattr(lm.model, 'hf_device_map', None) or {}).items()}}
    note_identity(ctx, 'llama-s device_map gpu+cpu float32', lm, 'llama-s', devices='cuda+cpu')
    parts = {'scores': lambda m: compare_scores(ref['choices'].scores, _score(m, ctx.reqs['decisions'])),
             'greedy': lambda m: {'eq_cpu': same_texts(ref['greedy'], m.generate(ctx.reqs['greedy']))},
             'sampled': lambda m: sample_twice(m, ctx.reqs['sampled'])}
    for name, fn in parts.items():
        try: out[name] = fn(lm)
        except Exception as e: out[name] = {'error': f'{type(e).__name__}: {e}'[:600]}
    out['expect_sampling_runs'] = 'error' not in out['sampled']
    return out


def _score(lm, decisions):
    from wordbench.evaluate.choices import score_choices
    return score_choices(lm, decisions).scores


def s7_shards(ctx: Ctx) -> dict:
    "The decisions split by sorted id into 2 and 4 parts, each with a fresh backend, against all at once."
    decisions, ids = ctx.reqs['decisions'], ctx.reqs['ids']
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    rows = []
    for dtype, kw in (('float32', {}), ('bfloat16', {'recheck_margin': 1.0})):
        lm, _ = load_lm(ctx.models['llama-s'], ctx.target, dtype, batch_size=16, **kw)
        whole = _score(lm, decisions)
        del lm
        for n in (2, 4):
            parts = [order[k::n] for k in range(n)]   # sorted ids dealt in turn, as `Shard.take` deals them
            got = [None] * len(decisions)
            for part in parts:
                lm, _ = load_lm(ctx.models['llama-s'], ctx.target, dtype, batch_size=16, **kw)
                for i, s in zip(part, _score(lm, [decisions[i] for i in part])): got[i] = s
                del lm
                free()
            c = compare_scores(whole, got)
            rows.append({'dtype': dtype, 'shards': n, 'max_abs_delta': c['max_abs_delta'], 'flips': c['flips'],
                         'identical_scores': sum(a == b for a, b in zip(whole, got)), 'decisions': len(got)})
    return {'rows': rows}


def s8_throughput(ctx: Ctx) -> dict:
    "S5's model in bf16: log-likelihood req/s and tok/s at batch 16, 64 and auto, GPU busy share; generation tok/s."
    import torch
    folder = big_model(ctx)
    reqs = long_requests(ctx, 128 if ctx.args.quick else 768, 120, seed=8)
    rows = []
    for bs in (16, 64, 'auto'):
        lm, _ = load_lm(folder, 'cuda', 'bfloat16', batch_size=bs, recheck_margin=0.0)
        lm.loglikelihood(reqs[:16], progress=False)   # warm-up
        busy, hidden = [], lm._hidden
        def timed_hidden(*a, **k):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            h = hidden(*a, **k)
            e1.record()
            busy.append((e0, e1))
            return h
        lm._hidden = timed_hidden
        tok0 = lm.counters['tokens_input']
        peak_mib(reset=True)
        _, s = timed(lm.loglikelihood, reqs, progress=False)
        gpu_s = sum(a.elapsed_time(b) for a, b in busy) / 1000
        rows.append({'kind': 'loglikelihood', 'batch': str(bs), 'requests': len(reqs), 's': s,
                     'req_per_s': len(reqs) / s, 'input_tok_per_s': (lm.counters['tokens_input'] - tok0) / s,
                     'decoder_busy_share': gpu_s / s, 'peak_mib': peak_mib(),
                     'oom_retries': lm.counters['oom_retries']})
        del lm
        free()
    gens = chats(ctx, 64 if ctx.args.quick else 128, 32)
    for rows_, kw in ((32, {}), ('auto', {'batch_size': 'auto'})):
        lm, _ = load_lm(folder, 'cuda', 'bfloat16', recheck_margin=0.0,
                        **(kw or {'generate_batch_size': 32}))
        lm.generate(gens[:4], progress=False)   # warm-up
        g0 = lm.counters['generated_tokens']
        peak_mib(reset=True)
        _, s = timed(lm.generate, gens, progress=False)
        rows.append({'kind': 'generate', 'batch': f'{rows_} rows', 'requests': len(gens), 's': s,
                     'gen_tok_per_s': (lm.counters['generated_tokens'] - g0) / s, 'peak_mib': peak_mib(),
                     'generate_batch_size': lm.generate_batch_size})
        del lm
        free()
    return {'model': ctx.report.get('big_model'), 'rows': rows}


def s9_identity(ctx: Ctx) -> dict:
    "Identities of every configuration (distinct, the re-check twin included); a `CachedLM` round trip on the target."
    out = {}
    lm, _ = load_lm(ctx.models['llama-s'], ctx.target, 'bfloat16', recheck_margin=1.0)
    try:
        twin = lm.exact()
        if twin is not None: note_identity(ctx, f'llama-s {ctx.target} bfloat16 re-check twin', twin, 'llama-s')
    except Exception as e: out['twin_error'] = f'{type(e).__name__}: {e}'[:400]
    del lm
    free()
    by_identity, by_computation = {}, {}
    for config, v in ctx.identities.items():
        by_identity.setdefault(v['identity'], set()).add(v['computes'])
        by_computation.setdefault(v['computes'], set()).add(v['identity'])
    out['identities'] = dict(ctx.identities)
    # one identity per computation: configurations that compute differently never share an identity (the cache
    # and the results files key on it), and the same computation reached another way (sdpa named or by default,
    # the re-check twin and plain float32) keeps one identity
    out['identities_shared_by_different_computations'] = {i: sorted(c) for i, c in by_identity.items() if len(c) > 1}
    out['computations_with_several_identities'] = {c: sorted(i) for c, i in by_computation.items() if len(i) > 1}
    out['expect_distinct'] = not out['identities_shared_by_different_computations']
    if ctx.target == 'cuda':
        out['expect_cuda_marked'] = all(':cuda' in v['identity'] for v in ctx.identities.values()
                                        if v['computes'].split()[1].startswith('cuda'))
    try:
        from wordbench.models.cache import CachedLM
    except ImportError as e:
        out['cached_lm'] = f'not run: {e}'
        return out
    reqs = [r for d in ctx.reqs['decisions'][:10] for r in d]
    db = ctx.tmp/'cache.sqlite'
    a = CachedLM(load_lm(ctx.models['llama-s'], ctx.target)[0], db)
    first = a.loglikelihood(reqs)
    again = CachedLM(load_lm(ctx.models['llama-s'], ctx.target)[0], db)
    second = again.loglikelihood(reqs)
    cpu = CachedLM(load_lm(ctx.models['llama-s'], 'cpu')[0], db)
    cpu.loglikelihood(reqs)
    out['cached_lm'] = {'requests': len(reqs), 'first': dict(a.last), 'second': dict(again.last),
                        'second_equals_first': first == second, 'cpu_after_target': dict(cpu.last)}
    out['expect_round_trip'] = again.last.get('cached') == len(set(reqs)) and first == second
    if ctx.target != 'cpu': out['expect_cpu_not_served_target_answers'] = cpu.last.get('cached') == 0
    return out


FUNCS = {'S0_environment': s0_environment, 'S1_models': s1_models, 'S2_cpu_reference': s2_cpu_reference,
         'S3_precision': s3_precision, 'S4_attention': s4_attention, 'S5_oom': s5_oom,
         'S6_device_map': s6_device_map, 'S7_shards': s7_shards, 'S8_throughput': s8_throughput,
         'S9_identity': s9_identity}
NEEDS = {'S2_cpu_reference': ['S1_models'], 'S3_precision': ['S2_cpu_reference'], 'S4_attention': ['S2_cpu_reference'],
         'S5_oom': ['S1_models'], 'S6_device_map': ['S2_cpu_reference'], 'S7_shards': ['S1_models'],
         'S8_throughput': ['S1_models'], 'S9_identity': ['S1_models']}


# ------------------------------------------------------------------------------------------------------ report
def clean(x):
    "JSON-safe: non-finite floats as strings, objects as repr, keys as strings."
    if isinstance(x, dict): return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)): return [clean(v) for v in x]
    if isinstance(x, float): return x if math.isfinite(x) else repr(x)
    return x if isinstance(x, (int, str, bool, type(None))) else repr(x)


def cell(v) -> str:
    if isinstance(v, float): return f'{v:.3g}' if abs(v) < 1e-2 or abs(v) >= 1e4 else f'{v:.4g}'
    if isinstance(v, list) and len(v) == 2 and all(isinstance(i, int) for i in v): return ratio(v)
    if isinstance(v, dict): return ', '.join(f'{k}={cell(w)}' for k, w in v.items() if not isinstance(w, (dict, list)))
    return str(v).replace('|', '\\|').replace('\n', ' ')[:160]


def md_table(rows: list[dict], skip=('traceback', 'identity', 'sampling', 'counters')) -> list[str]:
    cols = [c for c in dict.fromkeys(k for r in rows for k in r) if c not in skip]
    return (['| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)] +
            ['| ' + ' | '.join(cell(r.get(c, '')) for c in cols) + ' |' for r in rows] + [''])


def write_report(ctx: Ctx):
    rep = ctx.report
    rep['elapsed_s'] = time.time() - ctx.start
    tmp = ctx.out/'gpu_check.json.tmp'
    tmp.write_text(json.dumps(clean(rep), indent=1) + '\n')
    tmp.replace(ctx.out/'gpu_check.json')
    env = (rep['sections'].get('S0_environment') or {}).get('result') or {}
    md = ['# wordbench hf backend: GPU check (review-scale-5 §5)', '',
          f"{rep['started']}; {env.get('gpu', 'no GPU')}; torch {env.get('torch')}, transformers "
          f"{env.get('transformers')}; target {rep['target']}; {rep['elapsed_s']:.0f} s of a {rep['budget_s']:.0f} s "
          f"budget{' (quick)' if rep['quick'] else ''}.", '', '| section | status | s | note |', '|---|---|---|---|']
    for name, sec in rep['sections'].items():
        note = sec.get('reason') or (sec.get('error') or '').strip().splitlines()[-1:] or ['']
        md.append(f"| {name} | {sec['status']} | {sec.get('seconds', 0):.1f} | "
                  f"{cell(note if isinstance(note, str) else note[0])} |")
    md.append('')
    for name, sec in rep['sections'].items():
        res = sec.get('result')
        if sec['status'] == 'error': md += [f'## {name}: error', '', '```', sec['error'][-3000:], '```', '']
        if not isinstance(res, dict): continue
        md += [f'## {name}', '']
        flat = {k: v for k, v in res.items() if k != 'rows' and not isinstance(v, dict)}
        md += [f'- {k}: {cell(v)}' for k, v in flat.items()] + ([''] if flat else [])
        if res.get('rows'): md += md_table(res['rows'])
        for k, v in res.items():
            if isinstance(v, dict) and k != 'rows':
                md += [f'### {k}', '', '```json', json.dumps(clean(v), indent=1)[:4000], '```', '']
    (ctx.out/'gpu_check.md').write_text('\n'.join(md) + '\n')


def run_section(ctx: Ctx, name: str, plan_s: float, needs_target: bool, needs_cuda: bool):
    "Run one section (or record why not), store its result or traceback, then rewrite the report."
    import torch
    secs, t0 = ctx.report['sections'], time.time()
    reason = None
    if needs_target and ctx.target is None: reason = 'needs CUDA: --cpu-only'
    elif needs_cuda and not torch.cuda.is_available(): reason = 'needs CUDA: torch.cuda.is_available() is False'
    elif needs_cuda and ctx.target != 'cuda': reason = f'needs CUDA: the target is {ctx.target}'
    else:
        bad = [n for n in NEEDS.get(name, []) if secs.get(n, {}).get('status') != 'ran']
        scale = 0.2 if ctx.args.quick else 1.0
        if bad: reason = f"needs {', '.join(bad)}, which did not run"
        elif ctx.left() < plan_s * scale * 0.5:
            reason = f'time budget: {ctx.left():.0f} s left, the plan gives it {plan_s * scale:.0f} s'
    if reason:
        secs[name] = {'status': 'skipped', 'reason': reason}
        log(f'== {name}: skipped ({reason})')
    else:
        log(f'== {name}')
        secs[name] = {'status': 'running'}
        try:
            secs[name] = {'status': 'ran', 'result': FUNCS[name](ctx)}
        except Exception as e:
            secs[name] = {'status': 'error', 'error': traceback.format_exc()[-6000:]}
            log(f'!! {name}: {type(e).__name__}: {e}')
        secs[name]['seconds'] = time.time() - t0
        log(f'== {name}: {secs[name]["status"]} in {secs[name]["seconds"]:.1f} s')
    free()
    write_report(ctx)


def child_sample(args) -> int:
    "--child-sample FOLDER: the sampled requests twice on one configuration; one JSON line on stdout."
    lines, words = corpus()
    reqs = make_requests(words, args.quick)
    lm, _ = load_lm(args.child_sample, args.child_device, args.child_dtype, recheck_margin=0.0)
    print(json.dumps(clean(sample_twice(lm, reqs['sampled']))), flush=True)
    return 0


_ARGS = None


def main(argv=None) -> int:
    global _ARGS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--budget-s', type=float, default=540, help='start no section that would not fit in this many s')
    p.add_argument('--out', default=os.environ.get('OUT') or 'gpu_check_out', help='folder of the report')
    p.add_argument('--cpu-only', action='store_true', help='smoke run: S0-S2 on the CPU, the CUDA sections skipped')
    p.add_argument('--quick', action='store_true', help='tiny models and few requests')
    p.add_argument('--target', choices=('cuda', 'cpu'), default='cuda',
                   help='the device compared with CPU fp32 (cpu: to try S3, S4, S7 and S9 without a GPU)')
    p.add_argument('--only', nargs='*', help='run only these sections (and what they need)')
    p.add_argument('--s3-models', nargs='*', help='S3 on these models only (default: all four)')
    p.add_argument('--child-sample', help=argparse.SUPPRESS)
    p.add_argument('--child-device', default='cuda', help=argparse.SUPPRESS)
    p.add_argument('--child-dtype', default='float16', help=argparse.SUPPRESS)
    args = _ARGS = p.parse_args(argv)
    if args.child_sample: return child_sample(args)
    import torch
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    target = None if args.cpu_only else args.target
    if target == 'cuda' and not torch.cuda.is_available(): log('no CUDA device: the CUDA sections will be skipped')
    os.environ.setdefault('WORDBENCH_CACHE', str(Path(tempfile.gettempdir())/'wordbench_gpu_check_cache'))
    with tempfile.TemporaryDirectory(prefix='wb_gpu_check_') as tmp:
        ctx = Ctx(args=args, out=out, tmp=Path(tmp), target=target)
        ctx.report.update(format=FORMAT, started=time.strftime('%Y-%m-%d %H:%M:%S %Z'), target=target,
                          budget_s=args.budget_s, quick=args.quick, sections={})
        wanted = set(args.only or FUNCS)
        for n in list(wanted): wanted |= set(NEEDS.get(n, []))
        try:
            for name, plan_s, needs_target, needs_cuda in SECTIONS:
                if name in wanted: run_section(ctx, name, plan_s, needs_target, needs_cuda)
                else: ctx.report['sections'][name] = {'status': 'skipped', 'reason': 'not asked for (--only)'}
        finally:
            if torch.cuda.is_available(): torch.cuda.set_per_process_memory_fraction(1.0)
            write_report(ctx)
        log(f'wrote {out}/gpu_check.json and gpu_check.md')
        return 1 if any(s['status'] == 'error' for s in ctx.report['sections'].values()) else 0


if __name__ == '__main__':
    sys.exit(main())
