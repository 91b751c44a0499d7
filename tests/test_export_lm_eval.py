"`wordbench export lm-eval`: every task folder loads in lm-eval 0.4.13 (TaskManager + each task) and builds requests."


def _requests(task, n=3):
    task.build_all_requests(limit=n, rank=0, world_size=1)
    return task.instances


def test_every_task_valid(lm_eval_dir):
    from lm_eval.tasks import TaskManager
    from wordbench.publish.export import LM_EVAL_EXPORTS
    tm = TaskManager(include_path=str(lm_eval_dir), include_defaults=False)
    for name, e in LM_EVAL_EXPORTS.items():
        assert name in tm.all_groups, name
        tasks = list(e.tasks())
        assert tasks and all(t in tm.all_tasks for t in tasks)
        loaded = tm.load_task_or_group(tasks)
        for t in tasks:
            inst = _requests(loaded[t])
            assert inst, t
            kind = loaded[t].OUTPUT_TYPE
            assert {i.request_type for i in inst} == {'generate_until' if kind == 'generate_until' else 'loglikelihood'}


def test_requests_are_wordbench_requests(lm_eval_dir):
    "lm-eval's requests are those wordbench scores: WinoDict partial scoring, NewTerm answers, WSC+ digits, probes."
    from lm_eval.tasks import TaskManager
    tm = TaskManager(include_path=str(lm_eval_dir), include_defaults=False)
    t = tm.load_task_or_group(['winodict_prob1_of_5', 'newterm_csj_2022_ll', 'wscplus_scored', 'probes_role_88',
                               'wscplus_generated_sc5', 'newterm_coma_2022_gen'])
    (a, b) = [i.args for i in _requests(t['winodict_prob1_of_5'], 1)]
    assert a[1] == b[1] and a[0] != b[0] and 'means' in a[1]          # two contexts, one shared continuation
    assert [i.args[1] for i in _requests(t['newterm_csj_2022_ll'], 1)] == [' NO', ' YES']
    assert [i.args[1] for i in _requests(t['wscplus_scored'], 1)] == [' 0', ' 1', ' 2']
    (p,) = _requests(t['probes_role_88'], 1)
    doc = t['probes_role_88'].eval_docs[0]
    assert p.args == (doc['context'], ' ' + doc['target'])
    sc = _requests(t['wscplus_generated_sc5'], 1)
    assert sc[0].repeats == 5 and sc[0].args[1]['until'] == ['\nQ:']
    assert _requests(t['newterm_coma_2022_gen'], 1)[0].args[0].endswith('Answer: ')  # system and user text, joined


def test_filters_parse_as_wordbench(lm_eval_dir):
    "The exported filters give wordbench's parsed answers on wordbench's own replies (results files)."
    import pandas as pd
    from lm_eval.tasks import TaskManager
    from wordbench.core import project_root
    tm = TaskManager(include_path=str(lm_eval_dir), include_defaults=False)
    res = project_root()/'data'/'results'
    t = tm.load_task_or_group(['newterm_coma_2022_gen', 'newterm_csj_2022_gen', 'wscplus_generated'])
    for name, csv, key in (('newterm_coma_2022_gen', 'newterm-coma', 'pred'),
                           ('newterm_csj_2022_gen', 'newterm-csj', 'pred'),
                           ('wscplus_generated', 'wscplus', 'paper_pred')):
        task = t[name]
        docs = {d['id']: d for d in task.eval_docs}
        r = pd.read_csv(res/f'{csv}_smollm2-135m.csv.gz', dtype=str, keep_default_na=False)
        r = r[r.id.isin(docs) & (r.strategy == ('base1' if 'newterm' in name else 'zero-shot'))]
        assert len(r) >= 5, name
        (pipe,) = task._filters
        resps = [[x] for x in r.reply]
        out = resps
        for f in pipe.filters: out = f().apply(out, [docs[i] for i in r.id])
        want = [p if p != '' else '[invalid]' for p in r[key]]
        assert list(out) == want, name


def test_runs_end_to_end(lm_eval_dir):
    "lm-eval's own evaluator runs every group on its `dummy` model: one results row per task and filter."
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from wordbench.publish.export import LM_EVAL_EXPORTS
    tm = TaskManager(include_path=str(lm_eval_dir), include_defaults=False)
    out = simple_evaluate(model='dummy', tasks=list(LM_EVAL_EXPORTS), task_manager=tm, limit=1, log_samples=False)
    tasks = {t for e in LM_EVAL_EXPORTS.values() for t in e.tasks()}
    assert set(out['results']) >= tasks
    assert 'exact_match,authors-parse' in out['results']['newterm_csj_2022_gen']
    assert 'exact_match,paper-pattern' in out['results']['wscplus_generated_sc5']
    assert 'acc,none' in out['results']['winodict_original']
