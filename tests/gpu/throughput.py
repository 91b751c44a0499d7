"""Log-likelihood throughput on one GPU: wordbench's `hf` backend (shared-prefix batching) against lm-eval's HFLM.

Builds a seeded random ~0.2B Llama over the SmolLM2 tokenizer, Winograd-like decisions that share 5-shot prefixes,
and times both on the same CUDA device in float32; writes the numbers, the GPU's name and the date as JSON.
Usage: python tests/gpu/throughput.py OUT.json   (run by tests/gpu/run_gpu_check.sh)
"""
import datetime, json, sys, tempfile, time
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from wordbench.lm import get_lm, LoglikelihoodRequest
from wordbench.resources import materialise_local_model


def requests(n_items=300, shots=5):
    "Two options per item after one of four few-shot prefixes, as the Winograd tasks ask them."
    words = 'the trophy suitcase city council permit violence because small big feared refused'.split()
    line = lambda i: ' '.join(words[(i * 7 + k) % len(words)] for k in range(12)) + '.'
    prefixes = ['\n\n'.join(line(p * 31 + s) for s in range(shots)) + '\n\n' for p in range(4)]
    return [LoglikelihoodRequest(prefixes[i % 4] + line(i), f' {w} was {line(i + 1)[:20]}')
            for i in range(n_items) for w in ('trophy', 'suitcase')]


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t


def main(out_path):
    tok = AutoTokenizer.from_pretrained(materialise_local_model('smollm2-135m'))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
    folder = tempfile.mkdtemp()
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    reqs, res = requests(), {'gpu': torch.cuda.get_device_name(), 'date': datetime.date.today().isoformat(),
                             'torch': torch.__version__, 'requests': 0}
    res['requests'] = len(reqs)
    for bs in (64, 'auto'):
        lm = get_lm('hf', folder, device='cuda', batch_size=bs)
        lm.loglikelihood(reqs[:32])   # warm-up
        wb, s = timed(lambda: lm.loglikelihood(reqs))
        peak = torch.cuda.max_memory_allocated() / 2**20
        res[f'wordbench_bs{bs}'] = {'s': s, 'req_per_s': len(reqs) / s, 'peak_mib': peak}
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
        hf = HFLM(pretrained=folder, device='cuda', batch_size=64, dtype='float32')
        inst = [Instance('loglikelihood', {}, (r.context, r.continuation), i) for i, r in enumerate(reqs)]
        hf.loglikelihood(inst[:32])
        ref, s = timed(lambda: hf.loglikelihood(inst))
        res['lm_eval_hflm_bs64'] = {'s': s, 'req_per_s': len(reqs) / s,
                                    'max_abs_delta': max(abs(a[0] - b[0]) for a, b in zip(wb, ref))}
        res['speedup'] = res['lm_eval_hflm_bs64']['s'] / res['wordbench_bs64']['s']
    except ImportError as e: res['lm_eval_hflm_bs64'] = f'not run: {e}'
    with open(out_path, 'w') as f: json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == '__main__': main(sys.argv[1] if len(sys.argv) > 1 else 'lm_benchmark_cuda.json')
