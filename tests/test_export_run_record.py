"""`wordbench eval` writes a run record beside the results CSV in lm-eval's results shape; read back and checked
against lm-eval 0.4.13's own schema (`lm_eval.result_schema`, validated with pydantic)."""
import gzip, json
import pandas as pd
import pytest


def _eval(out, *extra):
    from wordbench.cli import main
    return main(['eval', 'winodict', '--model', 'toy', '--backend', 'dummy', '--no-cache', '--out', str(out),
                 '--limit', '6', '--buckets', 'prob1_of_5', '--shots', '0', '--seeds', '0', *extra])


def test_record_read_back(tmp_path):
    from pydantic import TypeAdapter
    from lm_eval.result_schema import EvalResults, SampleResult
    from wordbench.evaluate.run_record import read_run_record
    assert _eval(tmp_path, '--strategies', 'def_suffix', 'original_empty', '--batch-size', '2') == 0
    rec, samples = read_run_record(tmp_path/'winodict_toy.json')
    TypeAdapter(EvalResults).validate_python(rec)
    for s in samples: TypeAdapter(SampleResult).validate_python(s)
    rows = pd.read_csv(tmp_path/'winodict_toy.csv.gz')
    res = rec['results']['winodict']
    for strategy, g in rows.groupby('strategy'):
        assert res[f'acc,{strategy}|0-shot'] == pytest.approx(g.correct.mean())
        assert res[f'acc_stderr,{strategy}|0-shot'] == pytest.approx(g.correct.std() / len(g) ** 0.5)
    assert rec['n-samples']['winodict']['effective'] == len(rows) == len(samples)
    assert rec['config']['model'] == 'dummy' and rec['config']['batch_size'] == '2' and rec['model_name'] == 'toy'
    assert rec['config']['model_sha'] == 'dummy:toy' and rec['package_versions']['pandas'] == pd.__version__
    assert rec['date'] > 1.7e9 and len(rec['task_hashes']['winodict']) == 64
    # a sample's arguments are the row's two partial-scoring requests; it joins the row by id and setting
    s = next(x for x in samples if x['doc']['strategy'] == 'def_suffix')
    a0, a1 = s['arguments']['gen_args_0'], s['arguments']['gen_args_1']
    assert a0['arg_1'] == a1['arg_1'] and a0['arg_0'] != a1['arg_0']
    row = rows[(rows.id == s['doc']['id']) & (rows.strategy == 'def_suffix')].iloc[0]
    assert s['acc'] == row.correct and s['filtered_resps'] == [str(row.pred)]


def test_hash_follows_requests(tmp_path):
    "The task hash is that of the exact requests: the same run gives the same hash, another prompt another."
    assert _eval(tmp_path/'a', '--strategies', 'def_suffix') == 0
    assert _eval(tmp_path/'b', '--strategies', 'def_suffix') == 0
    assert _eval(tmp_path/'c', '--strategies', 'def_prefix') == 0
    h = {k: json.loads((tmp_path/k/'winodict_toy.json').read_text())['task_hashes']['winodict'] for k in 'abc'}
    assert h['a'] == h['b'] != h['c']
    lines = gzip.decompress((tmp_path/'a'/'winodict_toy.samples.jsonl.gz').read_bytes()).decode().splitlines()
    assert len(lines) == len(pd.read_csv(tmp_path/'a'/'winodict_toy.csv.gz'))


def test_missing_key_is_an_error(tmp_path):
    from wordbench.core import DataError
    from wordbench.evaluate.run_record import read_run_record
    p = tmp_path/'x.json'
    p.write_text(json.dumps({'results': {}, 'configs': {}}))
    with pytest.raises(DataError, match="x.json: field 'versions': missing"): read_run_record(p)
