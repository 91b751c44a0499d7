"""Stand-ins for vLLM's, SGLang's and llama.cpp's `llama-server`'s `/v1/completions` (tests only, 127.0.0.1),
answering with what a local transformers causal LM computes, in each engine's own shapes as their current source
writes them:
- vLLM: `vllm/entrypoints/openai/completion/serving.py` (`_create_completion_logprobs`: an echoed prompt's first
  token, BOS included, is `tokenizer.decode(token_id)` with log-prob None, and `text_offset` counts from it; echo sets
  `prompt_logprobs`), `completion/protocol.py` (`add_special_tokens` True: text prompts get BOS; `stop_reason`: the
  stop string or token id, None at EOS; `to_sampling_params`: each of `_DEFAULT_SAMPLING_PARAMS` from the request,
  else from the model's `generation_config.json`, as `--generation-config auto`, the default, reads it, else OpenAI's
  default), `vllm/sampling_params.py` and the engine's input checks (`logprobs` or `prompt_logprobs` over
  `max_logprobs`, default 20: "Requested sample logprobs of N, which is greater than max allowed: M"; a prompt over
  `max_model_len` refused with a 400), `/v1/models` (`owned_by='vllm'`, `max_model_len`, `root`: the weights path
  loaded; `entrypoints/openai/models/serving.py`), `GET /version` (`serve/instrumentator/basic.py`), `POST /tokenize`
  of chat messages (`serve/tokenize/protocol.py`: `tokens`), and `GET /server_info` only under
  VLLM_SERVER_DEV_MODE=1 (`serve/instrumentator/server_info.py`: `vllm_config` with `config_format=json`).
- SGLang: `python/sglang/srt/entrypoints/openai/serving_completions.py` (`_convert_to_internal_request`: echo with
  logprobs sets `logprob_start_len=0`, so the prompt's log-probs are computed; `_build_completion_response`:
  `matched_stop` is the stop string or the token id that ended the reply; `_build_sampling_params`: the request's
  fields, whose defaults are SGLang's own, so the model's defaults (`sampling_defaults="model"`) reach only chat
  requests, which these stand-ins do not serve), `entrypoints/openai/utils.py` (`to_openai_style_logprobs`: tokens
  and log-probs of the input then the output, `text_offset` -1 everywhere, top log-probs the top k only),
  `protocol.py` (no `prompt_logprobs` on completions; `/v1/models` `owned_by='sglang'`, `max_model_len`),
  `entrypoints/http_server.py` (`GET /server_info`, formerly `/get_server_info`: the `ServerArgs` fields, among them
  `model_path`, `revision`, `weight_version`, `dtype` (default `auto`), `quantization`, `kv_cache_dtype`,
  `chat_template`, `max_running_requests`, and `version`).
- llama.cpp's `llama-server`: `tools/server/server-task.cpp` (`params_from_json_cmpl`: each sampling field from the
  request, else the server's defaults, those of its command line; `to_json_oaicompat`: log-probs in the chat API's
  shape, `logprobs.content[i]` = `{id, token, bytes, logprob, top_logprobs}` with the top k only; no stop field beside
  `finish_reason`), `server-common.cpp` (echo refused: "Only no echo is supported"), `/props`
  (`default_generation_settings`, `total_slots`, `model_path`, `model_ftype`, `build_info`, `chat_template`, as the
  vendored build answers), `/v1/models` (`owned_by='llamacpp'`, no window).

Replies are sampled as the engine samples (`next_token`): penalties, then greedy at temperature 0, else temperature,
min-p, top-k and top-p; `generation_config` is what the engine fills in for a field the request leaves out (vLLM: the
model's `generation_config.json`; llama.cpp: the server's command line)."""
import json
from collections import Counter
from fixtures.vllm_standin import StandIn, _prompts

# per engine, the sampling fields its /v1/completions reads (its own names), each with the engine's default
READS = {'vllm': dict(repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, temperature=1.0, top_p=1.0,
                      top_k=0, min_p=0.0),   # `CompletionRequest._DEFAULT_SAMPLING_PARAMS`
         'sglang': dict(repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, temperature=1.0,
                        top_p=1.0, top_k=-1, min_p=0.0),   # `CompletionRequest`'s field defaults
         'llama.cpp': dict(repeat_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, temperature=0.8,
                           top_p=0.95, top_k=40, min_p=0.05, typical_p=1.0, top_n_sigma=-1.0, xtc_probability=0.0,
                           dry_multiplier=0.0, mirostat=0, dynatemp_range=0.0)}   # `common_params_sampling`
OFF_ONLY = ('typical_p', 'top_n_sigma', 'xtc_probability', 'dry_multiplier', 'mirostat', 'dynatemp_range')  # not here

class EngineStandIn(StandIn):
    ("vLLM's (`engine='vllm'`), SGLang's (`'sglang'`) or llama-server's (`'llama.cpp'`) protocol over a model; what "
     "it reports of itself: `weights` (a path), `version`, `dtype` (in the engine's words: vLLM only with "
     "`dev_mode`, SGLang `auto` unless given, llama.cpp a GGUF type), `chat_template`; `chat_status`: the status "
     "`/v1/chat/completions` answers (None: no such route, 404).")
    def __init__(self, model, tokenizer, engine='vllm', max_model_len=512, max_logprobs=20, generation_config=None,
                 weights='/models/standin', version='0.0.0+standin', dtype=None, dev_mode=False, chat_template=None,
                 chat_status=None, **kw):
        super().__init__(model, tokenizer, **kw)
        self.engine, self.max_model_len, self.max_logprobs = engine, max_model_len, max_logprobs
        self.generation_config = dict(generation_config or {})   # by generation_config.json's names
        self.weights, self.version, self.dtype, self.dev_mode = weights, version, dtype, dev_mode
        self.chat_template, self.chat_status = chat_template, chat_status
        outer, base = self, self.httpd.RequestHandlerClass
        class Handler(base):
            def do_GET(self):
                if (got := outer.get(self.path)) is None: return base.do_GET(self)
                self.send(200, got)
            def do_POST(self):
                if self.path == '/v1/chat/completions' and outer.chat_status:
                    length = int(self.headers['Content-Length'])
                    self.rfile.read(length)
                    return self.send(outer.chat_status, {'error': {'message': f'scripted {outer.chat_status}'}})
                if not (outer.engine == 'vllm' and self.path == '/tokenize'): return base.do_POST(self)
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                if not getattr(outer.tok, 'chat_template', None):
                    return self.send(400, {'error': {'message': 'this tokenizer has no chat template'}})
                text = outer.tok.apply_chat_template(body['messages'], tokenize=False, add_generation_prompt=True)
                ids = outer.tok.encode(text, add_special_tokens=False)
                self.send(200, {'count': len(ids), 'max_model_len': outer.max_model_len, 'tokens': ids})
        self.httpd.RequestHandlerClass = Handler

    def get(self, path: str) -> dict|None:
        "The engine's answer to `GET path` on the routes that describe it; None: the base stand-in's (a 404)."
        card = {'id': self.name, 'object': 'model', 'owned_by': self.engine.replace('.', '')}
        if path == '/v1/models' and self.engine == 'llama.cpp': return {'object': 'list', 'data': [card]}
        if path == '/v1/models':
            extra = {'root': self.weights, 'parent': None} if self.engine == 'vllm' else {}
            return {'object': 'list', 'data': [card | {'max_model_len': self.max_model_len} | extra]}
        if self.engine == 'vllm' and path == '/version': return {'version': self.version}
        if self.engine == 'vllm' and path == '/server_info?config_format=json' and self.dev_mode:
            return {'vllm_config': {'model_config': {'dtype': f'torch.{self.dtype or "float32"}', 'quantization': None},
                                    'cache_config': {'cache_dtype': 'auto'}}, 'vllm_env': {}, 'system_env': {}}
        if self.engine == 'sglang' and path in ('/server_info', '/get_server_info'):
            return {'model_path': self.weights, 'revision': None, 'weight_version': 'default', 'dtype': self.dtype or
                    'auto', 'quantization': None, 'kv_cache_dtype': 'auto', 'chat_template': self.chat_template,
                    'max_running_requests': self.slots, 'internal_states': [{}], 'version': self.version}
        if self.engine == 'llama.cpp' and path == '/props':
            return {'default_generation_settings': {'n_ctx': self.max_model_len}, 'total_slots': self.slots or 1,
                    'model_path': self.weights, 'model_ftype': self.dtype or 'F32', 'build_info': self.version,
                    'chat_template': self.chat_template or ''}
        return None

    def check(self, body: dict, prompts: list) -> None:
        ("The engine's refusals (a 400): a prompt over the window; in vLLM, more log-probs than `max_logprobs`; "
         "in llama-server, echo.")
        if self.engine == 'llama.cpp' and body.get('echo'): raise ValueError('Only no echo is supported')
        n = body.get('max_tokens', 16)
        for ids in prompts:
            if len(ids) + n > self.max_model_len:
                raise ValueError(f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                                 f'requested {len(ids) + n} tokens' if self.engine == 'vllm' else
                                 f'The input ({len(ids)} tokens) is longer than the model\'s context length '
                                 f'({self.max_model_len} tokens).')
        for asked in (body.get('logprobs'), body.get('prompt_logprobs')):
            if self.engine == 'vllm' and asked is not None and asked > self.max_logprobs:
                raise ValueError(f'Requested sample logprobs of {asked}, which is greater than max allowed: '
                                 f'{self.max_logprobs}')

    def complete(self, body: dict) -> dict:
        "The engine's completions response to `body`."
        prompts = _prompts(body['prompt'], self.tok)
        self.check(body, prompts)
        if self.engine != 'vllm': body = {k: v for k, v in body.items() if k != 'prompt_logprobs'}
        elif body.get('echo') and body.get('prompt_logprobs') is None:   # vLLM: echo asks prompt_logprobs too,
            body = dict(body, prompt_logprobs=body.get('logprobs'))      # attached to every choice beside `logprobs`
        out = super().complete(body)   # each choice through `finish`
        for choice in out['choices']:
            if self.engine == 'sglang' and choice['logprobs']: self.sglang_logprobs(choice['logprobs'],
                                                                                   body['logprobs'])
        return out

    def sampling(self, body: dict) -> dict:
        ("The sampling fields the engine reads (`READS`), by generation_config's names: each from `body`, else "
         "(vLLM, llama.cpp) from `generation_config`, else the engine's default.")
        given = {} if self.engine == 'sglang' else self.generation_config
        name = lambda k: 'repetition_penalty' if k == 'repeat_penalty' else k
        p = {name(k): body[k] if body.get(k) is not None else given.get(name(k), d)
             for k, d in READS[self.engine].items()}
        if on := [k for k in OFF_ONLY if k in p and p[k] != READS['llama.cpp'][k]]:
            raise ValueError(f'this stand-in serves {on} only turned off')
        return p

    def next_token(self, seq: list[int], n_prompt: int, logits, body: dict) -> int:
        ("The token after `seq` as the engine samples it: penalties on the logits (repetition over prompt and reply, "
         "presence and frequency over the reply), then greedy at temperature 0, else a draw after temperature, min-p, "
         "top-k and top-p, seeded by the request's `seed` and the position.")
        import torch
        p, x = self.sampling(body), logits.clone()
        if p['repetition_penalty'] != 1:
            seen = torch.tensor(sorted(set(seq)))
            x[seen] = torch.where(x[seen] > 0, x[seen] / p['repetition_penalty'], x[seen] * p['repetition_penalty'])
        for t, n in Counter(seq[n_prompt:]).items(): x[t] -= n * p['frequency_penalty'] + p['presence_penalty']
        if p['temperature'] < 1e-5: return int(x.argmax())
        probs = (x / p['temperature']).softmax(-1)
        keep = probs >= p['min_p'] * probs.max()
        if p['top_k'] > 0: keep &= probs >= probs.topk(p['top_k']).values[-1]
        if p['top_p'] < 1:   # the smallest set of likeliest tokens whose mass reaches top_p
            ranked = probs.sort(descending=True)
            keep[ranked.indices[ranked.values.cumsum(0) - ranked.values >= p['top_p']]] = False
        g = torch.Generator().manual_seed((body.get('seed') or 0) * 100_003 + len(seq))
        return int(torch.multinomial(probs * keep, 1, generator=g))

    def token_logprobs(self, seq, lp, shown, k) -> dict:
        "The engine's `logprobs` of the tokens at `shown`; llama-server's: the chat API's shape, the top `k` alone."
        if self.engine != 'llama.cpp': return super().token_logprobs(seq, lp, shown, k)
        text = lambda t: self.tok.decode([t])
        row = lambda t, l: {'id': t, 'token': text(t), 'bytes': list(text(t).encode()), 'logprob': l}
        content = []
        for j in shown:   # generated tokens only: echo is refused
            best = lp[j - 1].topk(k)
            top = [row(int(t), float(v)) for v, t in zip(best.values, best.indices)]
            content.append(row(seq[j], float(lp[j - 1][seq[j]])) | {'top_logprobs': top})
        return {'content': content}

    def finish(self, choice: dict, body: dict, new: list[int]) -> None:
        ("A generated reply as the engine writes it: ended at its first EOS or stop string, special tokens left out "
         "(`skip_special_tokens`), and which end it was in the engine's own field.")
        if body.get('echo'): return
        eos = next((i for i, t in enumerate(new) if t == self.tok.eos_token_id), None)
        text = self.tok.decode(new[:eos], skip_special_tokens=True)
        stops = [(text.find(s), s) for s in body.get('stop') or [] if s in text]
        field = {'vllm': 'stop_reason', 'sglang': 'matched_stop'}.get(self.engine)   # llama-server: no such field
        choice['text'] = text[:min(stops)[0]] if stops else text
        if field: choice[field] = None
        if not stops and eos is None: return
        choice['finish_reason'] = 'stop'
        if field and stops: choice[field] = min(stops)[1]
        elif field == 'matched_stop': choice[field] = self.tok.eos_token_id   # vLLM: None at EOS

    def sglang_logprobs(self, lp: dict, k: int) -> None:
        "vLLM's logprobs object as SGLang writes it: no text offsets, the top `k` only."
        lp['text_offset'] = [-1] * len(lp['tokens'])
        lp['top_logprobs'] = [None if t is None else dict(sorted(t.items(), key=lambda x: -x[1])[:max(k, 1)])
                              for t in lp['top_logprobs']]
