"""The artefact detectors on the committed WSC+ results: the example order that sets gemma3-270m's few-shot answers,
the copied worked example in smollm2-135m's, and no echo where a prompt shows no example."""
import pandas as pd
import pytest
from wordbench.core import project_root
from wordbench.evaluate.results import read_results
from wordbench.publish.artefacts import feature_dependence, level_accuracy
from wordbench.wscplus.metrics import with_artefacts
from wordbench.wscplus.task import WSCPLUS_SCHEMA


@pytest.fixture(scope='module')
def runs() -> dict:
    "The committed WSC+ rows of both default models, with `example_order` and `echo`."
    path = project_root() / 'data/results'
    return {m: with_artefacts(read_results(path / f'wscplus_{m}.csv.gz', WSCPLUS_SCHEMA))
            for m in ('gemma3-270m', 'smollm2-135m')}


def test_order_sets_gemma_few_shot(runs):
    fs = runs['gemma3-270m'].query("strategy == 'few-shot'")
    dep = feature_dependence(fs.pred, fs.example_order)
    assert dep['levels'] == 6 and dep['p'] < 0.001 and dep['determined'] > 0.8, dep
    acc = level_accuracy(fs.correct, fs.example_order).set_index('level').accuracy
    assert acc.max() - acc.min() > 50, acc   # the accuracy swings with the order, not with the items


def test_chat_prompts_keep_one_order(runs):
    fs = runs['smollm2-135m'].query("strategy == 'few-shot'")
    assert set(fs.example_order) == {'0,1,2'}
    assert pd.isna(feature_dependence(fs.pred, fs.example_order)['p'])


def test_copied_trophy_reason_is_echo(runs):
    fs = runs['smollm2-135m'].query("strategy == 'few-shot'")
    trophy = fs.reply.str.contains(r'^(?:A: )?2; \[prompt echo: 77 chars\]', regex=True)
    assert trophy.sum() >= 15 and fs.echo[trophy].all()
    assert fs.echo.sum() < len(fs)   # not every reply


def test_no_echo_without_examples(runs):
    for d in runs.values():
        assert not d[d.example_order == ''].echo.any()
        assert not d[d.protocol.isin(['score', 'circular'])].echo.any()
