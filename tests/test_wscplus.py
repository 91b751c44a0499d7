"""End-to-end checks of WSC+: the derived split is a fresh build, the CLI runs the task and both builders, the published
tables regenerate from the raw files, bad inputs name file, line and field, and the paper's prompt text never lands in
the project."""
import gzip, json
import pandas as pd
import pytest
from wordbench.core import DataError, project_root
from wordbench.cli import main

ROOT = project_root()


def test_committed_splits_are_a_fresh_build(tmp_path):
    "data/wscplus/ is what `wordbench build wscplus-splits` makes today, byte for byte."
    assert main(['build', 'wscplus-splits', '--out', str(tmp_path)]) == 0
    for f in ('splits.csv', 'report.json'):
        assert (tmp_path/f).read_bytes() == (ROOT/'data'/'wscplus'/f).read_bytes(), f'{f} is stale'
    rep = json.loads((tmp_path/'report.json').read_text())
    assert rep['splits'] == {'few-shot': 26, 'test': 2301, 'validation': 699}
    assert rep['unmatched'] == [{'pos_GPT4': 539, 'best_similarity': 0.5896}]   # not forced onto line 596
    assert [(r['evaluator'], r['position'], r['field']) for r in rep['repairs']] == [('Claude2', 273, 'type'),
                                                                                     ('Claude2', 273, 'reason')]


def test_eval_cli_runs_every_protocol_and_reruns_to_the_same_bytes(tmp_path):
    args = ['eval', 'wscplus', '--backend', 'dummy', '--model', 'toy', '--grid', 'cpu', '--n', '3',
            '--out', str(tmp_path), '--no-cache']
    assert main(args) == 0
    path = tmp_path/'wscplus_toy.csv.gz'
    first = path.read_bytes()
    assert main(args) == 0
    assert path.read_bytes() == first
    df = pd.read_csv(gzip.open(path), keep_default_na=False)
    assert set(df.protocol) == {'generate', 'sc', 'score', 'circular'}
    from wordbench.wscplus.task import WSCPLUS
    assert df.groupby('strategy').size().eq(3).all()
    assert set(df.strategy) == {s for part in WSCPLUS.grids['cpu'] for s in part['strategies']}
    assert (df[df.protocol == 'generate'].invalid == True).all()          # the dummy never writes an answer  # noqa: E712
    assert set(df.taxonomy) >= {'unparsed'}


def test_generation_builder_counts_failures_and_keeps_good_objects(tmp_path):
    "A reply with one good and one broken object keeps one row and counts one failure; the CLI builder runs."
    from wordbench.models.dummy import ScriptedLM
    from wordbench.wscplus.build import run_generation, generation_plan, known_statements
    good = json.dumps(dict(statement='Ann thanked Bea because she had helped.', pronoun='she',
                           snippet='she had helped', options=['Ann', 'Bea'], answer=1, reason='r'))
    one_reply = ScriptedLM.always(f'Pair 1.a:\n{good}\nPair 1.b:\n{{"statement": "broken", "answer": }}')
    calls, objects, failures = run_generation(one_reply, 'one', generation_plan(['toe'], ['wdq']), n_pairs=1,
                                              known=known_statements())
    assert (len(objects), len(failures), failures.reason.tolist()) == (1, 1, ['json_error'])
    assert main(['build', 'wscplus', '--backend', 'dummy', '--models', 'toy', '--templates', 'cot', '--queries', 'wdq',
                 'offensive', '--max-tokens', '8', '--out', str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {'calls.csv', 'objects.csv', 'failures.csv', 'yield.csv',
                                                     'annotation_sheet.csv', 'README.md'}
    assert 'Content note' in (tmp_path/'README.md').read_text()


def test_malformed_inputs_name_file_line_and_field(tmp_path):
    from wordbench.wscplus.sources import load_wscplus, load_wscplus_results, WSCPLUS_COLUMNS, WSCPLUS_RESULT_COLUMNS
    from wordbench.wscplus.splits import load_splits
    row = 'Jo met Al. He left.,He,He left,"[\'Jo\', \'Al\']",{a},r,GPT4,{t}\n'
    bad = tmp_path/'w.csv'
    rows = row.format(a=0, t='Traditional') + row.format(a=2, t='Traditional')
    bad.write_text(','.join(WSCPLUS_COLUMNS) + '\n' + rows)
    with pytest.raises(DataError, match=r"w\.csv:3: field 'answer': answer 2 does not fit type Traditional"):
        load_wscplus(bad)
    res = tmp_path/'r.csv'
    res.write_text(','.join(WSCPLUS_RESULT_COLUMNS) + '\n' + row.format(a=0, t='Traditional').strip() +
                   ',q,t,p,7,same,Accurate Predictions\n')
    with pytest.raises(DataError, match=r"r\.csv:2: field 'predicted_answer'"):
        load_wscplus_results(path=res)
    lines = (ROOT/'data'/'wscplus'/'splits.csv').read_text().splitlines()
    (tmp_path/'s.csv').write_text('\n'.join(lines[:5] + [lines[5].replace(',Traditional,', ',Weird,')]) + '\n')
    with pytest.raises(DataError, match=r"s\.csv:6: field 'type'"):
        load_splits(tmp_path/'s.csv')


def test_published_tables_regenerate_from_the_raw_files(tmp_path):
    "The long table of the published evaluations is what the analysis writes today, beside the paper's numbers."
    assert main(['regenerate', 'wscplus_published', '--out', str(tmp_path)]) == 0
    for f in ('wscplus_published.csv', 'wscplus_figure9.csv', 'wscplus_published_mcnemar.csv'):
        assert (tmp_path/f).read_bytes() == (ROOT/'figures'/f).read_bytes(), f'figures/{f} is stale'
    long = pd.read_csv(tmp_path/'wscplus_published.csv')
    assert {'evaluator', 'generator', 'type', 'metric', 'correct', 'n', 'value'} <= set(long.columns)
    gpt4 = long[(long.evaluator == 'GPT-4') & (long.generator == 'all') & (long.type == 'all')
                & (long.metric == 'accuracy')]
    assert (gpt4.correct.iloc[0], gpt4.n.iloc[0], gpt4.paper.iloc[0]) == (481, 700, 68.7)


def test_the_papers_toe_text_is_derived_never_stored():
    "Slices of the authors' ToE template (derived at run time) occur in no file of the project."
    from wordbench.wscplus.prompts import paper_toe_text
    text = paper_toe_text()
    needles = [text[i:i + 60] for i in range(0, len(text) - 60, 400)]
    skip = {'.git', '.venv', '__pycache__', '.ipynb_checkpoints'}
    hits = []
    for p in ROOT.rglob('*'):
        if not p.is_file() or skip & set(p.relative_to(ROOT).parts) or p.stat().st_size > 20_000_000: continue
        # a run record's requests: git-ignored, local, like the cache
        if p.name.endswith('.samples.jsonl.gz'): continue
        data = p.read_bytes()
        if p.suffix == '.gz': data = gzip.decompress(data)
        body = data.decode('utf-8', errors='ignore')
        hits += [str(p) for n in needles if n in body]
    assert not hits, hits[:5]


def test_committed_replies_read_as_stored():
    """Each committed reply is stored with every echo of the prompt marked where `prompts.written` cut it (WSC+'s
    `stored_reply`), so reading it again, each marker taken as a line break, gives the stored strict and lenient
    answers: every answer comes from what the model wrote, and a reader of the reply sees what was parsed."""
    import re
    from wordbench.wscplus.extract import extract_answer, extract_answer_lenient, extract_cued, self_consistency_vote
    from wordbench.wscplus.splits import load_items
    options = {it['id']: it['options'] for it in load_items('all')}
    checked, echoed = 0, 0
    for m in ('smollm2-135m', 'gemma3-270m'):
        df = pd.read_csv(ROOT/'data'/'results'/f'wscplus_{m}.csv.gz', keep_default_na=False, na_values=[''])
        for r in df[df.protocol.isin(['generate', 'sc']) & ~df.failed.astype(bool)].itertuples():
            reply = '' if pd.isna(r.reply) else r.reply
            echoed += '[prompt echo:' in reply
            reps = json.loads(reply) if r.protocol == 'sc' else [reply]
            reps = [re.sub(r'\[prompt echo: \d+ chars\]', '\n', x) for x in reps]
            s = [(extract_cued if r.prompt_format == 'raw-cued' else extract_answer)(x) for x in reps]
            l = [extract_answer_lenient(x, options[str(r.id)]) for x in reps]
            (s, l) = (self_consistency_vote(s)[0], self_consistency_vote(l)[0]) if r.protocol == 'sc' else (s[0], l[0])
            old = (None if pd.isna(r.pred) else int(r.pred), r.rule,
                   None if pd.isna(r.lenient_pred) else int(r.lenient_pred), r.lenient_rule)
            assert (s.answer, s.rule, l.answer, l.rule) == old, (m, r.strategy, r.id)
            checked += 1
    assert checked > 350 and echoed > 50, (checked, echoed)
