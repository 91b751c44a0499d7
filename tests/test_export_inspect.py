"""`wordbench export inspect`: the committed results as Inspect logs, read back with inspect-ai (a sample per row,
the same scores, the header's metrics), and bundled into a static viewer by `inspect view bundle`."""
import os, time
from pathlib import Path
import pandas as pd
import pytest
from inspect_ai.log import read_eval_log
from wordbench.publish.inspect_logs import export_inspect, inspect_bundle, sample_id, score_metrics
from wordbench.evaluate.results import read_results, results_dir
from wordbench.systems import load_systems
from wordbench.evaluate.tasks import TASKS

load_systems()
# one task of each kind of request and parser (a few seconds); WORDBENCH_INSPECT_ALL=1 exports every task (minutes)
FAST = ('newterm-coma', 'newterm-cost-ll', 'newterm-deduce', 'wscplus', 'winodict-foreign')
NAMES = list(TASKS) if os.environ.get('WORDBENCH_INSPECT_ALL') else list(FAST)


@pytest.fixture(scope='module')
def logs(tmp_path_factory):
    out, t0 = tmp_path_factory.mktemp('inspect'), time.time()
    paths = export_inspect(NAMES, out)
    print(f'exported {len(paths)} logs in {time.time() - t0:.1f} s')
    return out, {p: read_eval_log(str(p)) for p in paths}


def committed(name):
    return {str(r.model.iloc[0]): r for r in (read_results(p, TASKS[name].schema)
                                              for p in sorted(results_dir().glob(f'{name}_*.csv.gz')))}


def test_a_log_per_task_and_model(logs):
    _, read = logs
    want = {f'{n}_{m}.eval' for n in NAMES for m in committed(n)}
    assert {p.name for p in read} == want and len(want) >= 2 * len(NAMES)


@pytest.mark.parametrize('name', NAMES)
def test_a_sample_per_row_with_its_scores(logs, name):
    _, read = logs
    for model, rows in committed(name).items():
        log = read[next(p for p in read if p.name == f'{name}_{model}.eval')]
        assert (log.status, log.eval.task, log.eval.model) == ('success', name, model)
        assert len(log.samples) == len(rows) == log.results.total_samples
        samples = {s.id: s for s in log.samples}
        assert len(samples) == len(rows)
        assert not any(str(s.input).startswith('(the prompt') or not s.input for s in log.samples)
        score = 'correct' if rows.correct.notna().any() else 'similarity'
        for r in rows.to_dict('records'):
            s, want = samples[sample_id(r, TASKS[name])], r[score]
            got = (s.scores or {}).get(score)
            assert (got is None) == pd.isna(want), (s.id, got, want)
            if got is not None:
                assert got.value == pytest.approx(float(want)) and got.answer == (None if pd.isna(r['pred'])
                                                                                 else str(r['pred']))
            assert (s.metadata['strategy'], s.metadata['shots'], s.metadata['seed']) == \
                (r['strategy'], r['shots'], r['seed'])


@pytest.mark.parametrize('name', NAMES)
def test_the_header_holds_the_metrics_and_intervals(logs, name):
    _, read = logs
    for model, rows in committed(name).items():
        log = read[next(p for p in read if p.name == f'{name}_{model}.eval')]
        head = {s.name: s for s in log.results.scores}
        want = {s.name: s for s in score_metrics(rows)}
        assert set(head) == set(want) and head
        for n, s in want.items():
            assert set(head[n].metrics) == set(s.metrics) >= {'ci_low', 'ci_high'}
            for m, v in s.metrics.items(): assert head[n].metrics[m].value == pytest.approx(v.value, nan_ok=True)
        first = log.results.scores[0]
        stat = first.metrics.get('accuracy') or first.metrics['mean']
        assert first.metrics['ci_low'].value <= stat.value <= first.metrics['ci_high'].value


def test_inspect_view_bundle(logs, tmp_path):
    out, _ = logs
    site = inspect_bundle(out, tmp_path/'viewer')
    assert (site/'index.html').is_file()
    assert {p.name for p in (site/'logs').glob('*.eval')} == {p.name for p in Path(out).glob('*.eval')}
