"""Parity with lm-eval itself: the exported lm-eval tasks, run by lm-eval 0.4.13's `HFLM` on smollm2-135m, and
wordbench's own tasks (`run_task`, what `wordbench eval` runs) on the same items give the same log-likelihoods
(within 1e-4) and the same decisions. A few items per log-likelihood task; the generative tasks' parity (same
parsed answers from the same replies) is `test_export_lm_eval.test_filters_parse_as_wordbench`."""
import os, warnings
import numpy as np
import pytest

os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
os.environ.setdefault('HF_HUB_OFFLINE', '1')
N = 2  # documents per task


@pytest.fixture(scope='module')
def env(tmp_path_factory):
    "`(TaskManager, wordbench hf LM, lm-eval HFLM on the same model object)`."
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from wordbench.systems import load_systems
    from wordbench.publish.export import export_hf, export_lm_eval
    from wordbench.models.lm import get_lm
    load_systems()
    root = tmp_path_factory.mktemp('exports')
    names = ['winodict', 'newterm', 'probes', 'wscplus']
    export_hf(names, root/'hf')
    export_lm_eval(names, root/'lm-eval', root/'hf')
    wb = get_lm('hf', 'smollm2-135m', dtype='float32')
    return TaskManager(include_path=str(root/'lm-eval'), include_defaults=False), wb, HFLM(
        pretrained=wb.model, tokenizer=wb.tokenizer, batch_size=4)


def harness_scores(env, name):
    "lm-eval's documents and `(log-likelihood, is_greedy)` per request, grouped by document."
    tm, _, harness = env
    task = tm.load_task_or_group([name])[name]
    task.build_all_requests(limit=N, rank=0, world_size=1)
    out = harness.loglikelihood(task.instances, disable_tqdm=True)
    docs = {}
    for inst, r in zip(task.instances, out): docs.setdefault(inst.doc_id, (inst.doc, []))[1].append(r)
    return [docs[i] for i in sorted(docs)]


def wordbench_rows(env, task, strategy, items, pool=None):
    from wordbench.evaluate.tasks import Setting, run_task
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        res = run_task(task, env[1], [Setting(strategy)], items, pool, progress=False)
    return {r['id']: r for r in res.to_dict('records')}


def check(pairs):
    "Each `(lm-eval log-likelihoods, wordbench's)` within 1e-4 and the same argmax."
    assert pairs
    for h, w in pairs:
        assert np.allclose(h, w, atol=1e-4, rtol=0), (h, w)
        assert int(np.argmax(h)) == int(np.argmax(w))


@pytest.mark.parametrize('config,strategy', [('prob1_of_5', 'def_suffix'), ('original', 'original_empty')])
def test_winodict(env, config, strategy):
    from wordbench.winodict.task import WINODICT, load_items
    docs = harness_scores(env, f'winodict_{config}')
    ids = {d['id'] for d, _ in docs}
    items = [r for r in load_items() if r['id'] in ids and r['bucket'] == 'prob1_of_5']
    rows = wordbench_rows(env, WINODICT, strategy, items, items)
    check([([x for x, _ in s], [rows[d['id']]['logprob1'], rows[d['id']]['logprob2']]) for d, s in docs])
    assert all(rows[d['id']]['pred'] == int(np.argmax([x for x, _ in s])) for d, s in docs)


@pytest.mark.parametrize('task', ['COMA', 'COST', 'CSJ'])
def test_newterm_ll(env, task):
    from wordbench.newterm.items import load_items
    from wordbench.newterm.task import NEWTERM_LL_TASKS
    docs = harness_scores(env, f'newterm_{task.lower()}_2022_ll')
    ids = {d['id'] for d, _ in docs}
    items = [it for it in load_items(task, [2022]) if it['id'] in ids]
    rows = wordbench_rows(env, NEWTERM_LL_TASKS[task], 'base1' if task == 'CSJ' else 'base1-text', items, items)
    check([([x for x, _ in s], [rows[d['id']][f'lp{i}'] for i in range(len(s))]) for d, s in docs])


def test_wscplus_scored(env):
    from wordbench.wscplus.splits import load_items
    from wordbench.wscplus.task import WSCPLUS
    docs = harness_scores(env, 'wscplus_scored')
    ids = {d['id'] for d, _ in docs}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        items, pool = [it for it in load_items('validation') if it['id'] in ids], load_items('few-shot')
    rows = wordbench_rows(env, WSCPLUS, 'zero-shot-scored', items, pool)
    check([([x for x, _ in s], [rows[d['id']][f'logprob{i}'] for i in range(3)]) for d, s in docs])
    assert all(rows[d['id']]['pred'] == int(np.argmax([x for x, _ in s])) for d, s in docs)


def test_probes_top1(env):
    from wordbench.probes.task import CLOZE
    docs = harness_scores(env, 'probes_role_88')
    items, _ = CLOZE.load(datasets=['ROLE-88'], pairs=2, k=1, whole_word=1)
    rows = wordbench_rows(env, CLOZE, 'causal', [it for it in items if it['id'] in {d['id'] for d, _ in docs}])
    assert len(rows) == len(docs) == N
    for d, ((lp, greedy),) in docs:
        assert abs(lp - rows[d['id']]['word_logprob']) < 1e-4
        assert int(greedy) == rows[d['id']]['word_greedy']


@pytest.fixture(scope='module')
def generations(env):
    "lm-eval's greedy replies (chat template applied, 16 new tokens) and filtered answers, per task and document id."
    from lm_eval import simple_evaluate
    tm, _, harness = env
    names = ['wscplus_generated', 'newterm_coma_2022_gen', 'newterm_csj_2022_gen']
    out = simple_evaluate(model=harness, tasks=names, task_manager=tm, limit=N, log_samples=True,
                          apply_chat_template=True, gen_kwargs='max_gen_toks=16')
    return {n: {s['doc']['id']: (s['resps'][0][0], s['filtered_resps'][0]) for s in out['samples'][n]} for n in names}


def test_wscplus_generated(env, generations):
    "Same chat, same greedy reply, same answer under the paper's pattern (wordbench's `paper_extract`)."
    import dataclasses
    from wordbench.wscplus.splits import load_items
    from wordbench.wscplus.extract import paper_extract
    from wordbench.wscplus.task import item_requests, shots_of
    got = generations['wscplus_generated']
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        items, pool = [it for it in load_items('validation') if it['id'] in got], load_items('few-shot')
    reqs = [dataclasses.replace(item_requests(it, 'zero-shot', shots_of(pool))[0], max_tokens=16) for it in items]
    assert len(reqs) == N
    for it, g in zip(items, env[1].generate(reqs, progress=False)):
        reply, answer = got[it['id']]
        assert reply == g.text, (it['id'], reply, g.text)
        assert answer == str(paper_extract(g.text) if paper_extract(g.text) is not None else '[invalid]')


@pytest.mark.parametrize('task', ['COMA', 'CSJ'])
def test_newterm_generated(env, generations, task):
    "Same system and user turns, same greedy reply, same answer under the authors' parsing."
    from wordbench.newterm.items import load_items
    from wordbench.newterm.prompts import generate_request, parse_reply
    got = generations[f'newterm_{task.lower()}_2022_gen']
    items = [it for it in load_items(task, [2022]) if it['id'] in got]
    replies = env[1].generate([generate_request(it, 'base1', (), 16) for it in items], progress=False)
    assert len(items) == N
    for it, g in zip(items, replies):
        reply, answer = got[it['id']]
        assert reply == g.text, (it['id'], reply, g.text)
        assert answer == (parse_reply(it, g.text)[0] or '[invalid]')
