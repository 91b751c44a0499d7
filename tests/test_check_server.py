"""`wordbench check-server` end to end: the stand-ins for vLLM and SGLang (`engine_standins.py`) serve SmolLM2-135M
as the `hf` backend computes it, so a seeded sample of two scored tasks agrees (exit 0); a stand-in that moves one
log-prob of one task's requests makes the check fail (exit 1) and name that task."""
import pandas as pd
import pytest
from wordbench.cli import main
from wordbench.models.lm import get_lm
from engine_standins import EngineStandIn

TASKS = ['winodict', 'newterm-coma-ll']   # two scored tasks; two jobs drawn of each


class Perturbed(EngineStandIn):
    "An engine stand-in that adds -1 nat to the last prompt token of the first prompt holding `marker` (either mode)."
    marker, done = '\nAnswer:', False
    def complete(self, body: dict) -> dict:
        from fixtures.vllm_standin import _prompts
        out = super().complete(body)
        for ids, choice in zip(_prompts(body['prompt'], self.tok), out['choices']):
            if self.done or self.marker not in self.tok.decode(ids): continue
            rows, lp = choice.get('prompt_logprobs'), choice.get('logprobs')
            if body.get('prompt_logprobs') and rows: rows[len(ids) - 1][str(ids[-1])]['logprob'] -= 1.0  # vLLM's way
            elif body.get('echo') and lp: lp['token_logprobs'][len(ids) - 1] -= 1.0
            else: continue
            self.done = True
        return out


@pytest.fixture(scope='module')
def ref():
    "SmolLM2-135M on the `hf` backend: the stand-ins serve its model and tokenizer."
    return get_lm('hf', 'smollm2-135m', batch_size=4)


def check(srv, tmp_path, capsys) -> tuple[int, pd.DataFrame, str]:
    "Run `wordbench check-server` against `srv`: exit status, the table written, the printed output."
    out = tmp_path/'check.csv'
    code = main(['check-server', '--base-url', srv.base_url, '--model', 'smollm2-135m', '--tasks', *TASKS,
                 '--sample', '2', '--batch-size', '4', '--backend-arg', 'max_concurrency=2', '--out', str(out)])
    return code, pd.read_csv(out), capsys.readouterr().out


@pytest.mark.parametrize('engine', ['vllm', 'sglang'])
def test_server_agrees(ref, engine, tmp_path, capsys):
    "Every sampled request within 1e-4 of `hf`, every decision and greedy flag equal: exit 0."
    with EngineStandIn(ref.model, ref.tokenizer, engine=engine, name='smollm2-135m', max_batch=4,
                       max_model_len=2048) as srv:
        code, table, printed = check(srv, tmp_path, capsys)
    assert code == 0, printed
    assert table.task.tolist() == TASKS and table.status.tolist() == ['ok', 'ok']
    # two WinoDict decisions of two options; two NewTerm COMA jobs, here both CircularEval (4 rotations x 4 letters)
    assert table.requests.tolist() == [4, 32] and table.failed.sum() == 0
    assert table.max_abs_diff.max() < 1e-4
    assert (table.decisions_differ.sum(), table.greedy_differ.sum()) == (0, 0)
    assert 'every decision equal' in printed.splitlines()[-1]


def test_server_disagrees(ref, tmp_path, capsys):
    "One log-prob of one task moved by a nat: that task fails by name, the other passes, exit 1."
    with Perturbed(ref.model, ref.tokenizer, engine='vllm', name='smollm2-135m', max_batch=4,
                   max_model_len=2048) as srv:
        code, table, printed = check(srv, tmp_path, capsys)
    assert srv.done and code == 1
    assert table.set_index('task').status.to_dict() == {'winodict': 'ok', 'newterm-coma-ll': 'FAIL'}
    assert abs(table.max_abs_diff.max() - 1.0) < 1e-3
    assert printed.splitlines()[-1].endswith('FAILED: newterm-coma-ll')


def test_reference_in_the_servers_precision(ref):
    ("A server reporting bfloat16 (SGLang's `dtype`) is compared with a bfloat16 reference; one reporting `auto` "
     "(SGLang's default: the checkpoint's), with the float32 one.")
    from wordbench.evaluate.check_server import server_lms
    for reported, want in (('bfloat16', 'bfloat16'), (None, 'float32')):
        with EngineStandIn(ref.model, ref.tokenizer, engine='sglang', name='smollm2-135m', dtype=reported) as srv:
            server, hf = server_lms(srv.base_url, 'smollm2-135m', hf_options={'batch_size': 4})
            assert (server.dtype, hf.dtype) == (reported or 'auto', want)
