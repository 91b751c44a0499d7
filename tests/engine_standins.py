"""Stand-ins for vLLM's and SGLang's `/v1/completions` (tests only, 127.0.0.1), answering with what a local
transformers causal LM computes, in each engine's own shapes as their current source writes them:
- vLLM: `vllm/entrypoints/openai/completion/serving.py` (`_create_completion_logprobs`: an echoed prompt's first
  token, BOS included, is `tokenizer.decode(token_id)` with log-prob None, and `text_offset` counts from it; echo sets
  `prompt_logprobs`), `completion/protocol.py` (`add_special_tokens` True: text prompts get BOS; `stop_reason`: the
  stop string or token id, None at EOS), `vllm/sampling_params.py` and the engine's input checks (`logprobs` or
  `prompt_logprobs` over `max_logprobs`, default 20: "Requested sample logprobs of N, which is greater than max
  allowed: M"; a prompt over `max_model_len` refused with a 400), `/v1/models` (`owned_by='vllm'`, `max_model_len`).
- SGLang: `python/sglang/srt/entrypoints/openai/serving_completions.py` (`_convert_to_internal_request`: echo with
  logprobs sets `logprob_start_len=0`, so the prompt's log-probs are computed; `_build_completion_response`:
  `matched_stop` is the stop string or the token id that ended the reply), `entrypoints/openai/utils.py`
  (`to_openai_style_logprobs`: tokens and log-probs of the input then the output, `text_offset` -1 everywhere, top
  log-probs the top k only), `protocol.py` (no `prompt_logprobs` on completions; `/v1/models` `owned_by='sglang'`,
  `max_model_len`)."""
from fixtures.vllm_standin import StandIn, _prompts

class EngineStandIn(StandIn):
    "vLLM's (`engine='vllm'`) or SGLang's (`'sglang'`) completions protocol over `model`/`tokenizer`."
    def __init__(self, model, tokenizer, engine='vllm', max_model_len=512, max_logprobs=20, **kw):
        super().__init__(model, tokenizer, **kw)
        self.engine, self.max_model_len, self.max_logprobs = engine, max_model_len, max_logprobs
        outer, base = self, self.httpd.RequestHandlerClass
        class Handler(base):
            def do_GET(self):
                if self.path != '/v1/models': return base.do_GET(self)
                self.send(200, {'object': 'list', 'data': [{'id': outer.name, 'object': 'model',
                                                            'owned_by': outer.engine,
                                                            'max_model_len': outer.max_model_len}]})
        self.httpd.RequestHandlerClass = Handler

    def check(self, body: dict, prompts: list) -> None:
        "The engine's refusals (a 400): a prompt over the window; in vLLM, more log-probs than `max_logprobs`."
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
        if self.engine == 'sglang': body = {k: v for k, v in body.items() if k != 'prompt_logprobs'}
        out = super().complete(body)
        for choice in out['choices']:
            self.finish(choice, body)
            if self.engine == 'sglang' and choice['logprobs']: self.sglang_logprobs(choice['logprobs'],
                                                                                   body['logprobs'])
        return out

    def finish(self, choice: dict, body: dict) -> None:
        "Cut a generated reply at its first stop string or EOS, and say which as the engine does."
        if body.get('echo'): return
        text, eos = choice['text'], self.tok.eos_token
        ends = [(text.find(s), s) for s in body.get('stop') or [] if s in text]
        ends += [(text.find(eos), None)] if eos and eos in text else []
        field = 'stop_reason' if self.engine == 'vllm' else 'matched_stop'
        choice[field] = None
        if not ends: return
        at, stop = min(ends, key=lambda e: e[0])
        choice.update({'text': text[:at], 'finish_reason': 'stop',
                       field: stop if stop is not None or self.engine == 'vllm' else self.tok.eos_token_id})

    def sglang_logprobs(self, lp: dict, k: int) -> None:
        "vLLM's logprobs object as SGLang writes it: no text offsets, the top `k` only."
        lp['text_offset'] = [-1] * len(lp['tokens'])
        lp['top_logprobs'] = [None if t is None else dict(sorted(t.items(), key=lambda x: -x[1])[:max(k, 1)])
                              for t in lp['top_logprobs']]
