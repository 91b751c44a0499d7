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
    assert set(df.protocol) == {'generate', 'sc', 'score'}
    from wordbench.wscplus.task import WSCPLUS
    assert df.groupby('strategy').size().eq(3).all()
    assert set(df.strategy) == {s for part in WSCPLUS.grids['cpu'] for s in part['strategies']}
    assert (df[df.protocol == 'generate'].invalid == True).all()          # the dummy never writes an answer  # noqa: E712
    assert set(df.taxonomy) >= {'unparsed'}


def test_generation_builder_counts_failures_and_keeps_good_objects(tmp_path):
    "A reply with one good and one broken object keeps one row and counts one failure; the CLI builder runs."
    from wordbench.build import ScriptedLM
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


def test_committed_replies_without_an_echo_read_as_stored():
    """The extraction rules of issue 19 (hedges, negations, spacing, a late `A:`) change no committed row whose stored
    reply is whole (no echo marker): the stored answers were read from the full reply, these from the stored one."""
    from wordbench.wscplus.extract import extract_answer, extract_answer_lenient, self_consistency_vote
    from wordbench.wscplus.splits import load_items
    options = {it['id']: it['options'] for it in load_items('all')}
    checked = 0
    for m in ('smollm2-135m', 'gemma3-270m'):
        df = pd.read_csv(ROOT/'data'/'results'/f'wscplus_{m}.csv.gz', keep_default_na=False, na_values=[''])
        for r in df[df.protocol != 'score'].itertuples():
            reply = '' if pd.isna(r.reply) else r.reply
            if '[prompt echo:' in reply: continue
            reps = json.loads(reply) if r.protocol == 'sc' else [reply]
            s = [extract_answer(x) for x in reps]
            l = [extract_answer_lenient(x, options[str(r.id)]) for x in reps]
            (s, l) = (self_consistency_vote(s)[0], self_consistency_vote(l)[0]) if r.protocol == 'sc' else (s[0], l[0])
            old = (None if pd.isna(r.pred) else int(r.pred), r.rule,
                   None if pd.isna(r.lenient_pred) else int(r.lenient_pred), r.lenient_rule)
            assert (s.answer, s.rule, l.answer, l.rule) == old, (m, r.strategy, r.id)
            checked += 1
    assert checked > 250


_MARK = r'\[prompt echo: (\d+) chars\]'


def _may_read_differently(text: str, options, strict: str) -> bool:
    "Whether `text` holds a pattern on which the issue-19 rules may read differently, given the old strict outcome."
    import re
    from wordbench.wscplus.extract import HEDGED_SEMICOLON, HEDGED_ANSWER, SPACED_SEMICOLON, ANSWER_LINE, NEGATED
    pats = {'answer': [HEDGED_SEMICOLON], 'failed': [HEDGED_SEMICOLON, HEDGED_ANSWER]}.get(
        strict, [HEDGED_SEMICOLON, HEDGED_ANSWER, SPACED_SEMICOLON, ANSWER_LINE])
    if any(p.search(text) for p in pats): return True
    if strict != 'unparsed': return False
    return any(NEGATED.search(text[max(0, m.start() - 12):m.start()]) for o in options or ()
               for m in re.finditer(rf'(?<!\w){re.escape(o.strip())}(?!\w)', text, re.I))


def _echo_cannot_matter(reply: str, prompt: str, options, strict: str, window: int=40) -> bool:
    "No such pattern in the visible text, in the prompt (what a marker hides), or across a marker's edge."
    import re
    if _may_read_differently(re.sub(_MARK, '\x00', reply), options, strict): return False
    if _may_read_differently(prompt, options, strict): return False
    parts = re.split(_MARK, reply)
    for k in range(1, len(parts), 2):
        left, right = parts[k - 1][-window:], parts[k + 1][:window]
        for p in range(len(prompt)):
            if (_may_read_differently(left + prompt[p:p + window], options, strict)
                    or _may_read_differently(prompt[max(0, p - window):p] + right, options, strict)): return False
    return True


def test_committed_replies_with_an_echo_are_proven_unchanged_or_listed():
    """A redacted reply hides prompt text only. Given each row's stored strict outcome (read from the full reply),
    the new rules can differ only on a hedge, a spaced semicolon, a late `A:` line or a negated option; where none of
    them can lie in the visible text, the prompt or across a marker's edge, the stored answers stand. The rest are
    the rows re-run (listed here). Rows of primed prompts (`raw-primed`) were written after these rules, by them."""
    import re
    from wordbench.wscplus.splits import load_items
    from wordbench.wscplus.task import item_requests, shots_of, PRIMED
    items, shots = {it['id']: it for it in load_items('all')}, shots_of(load_items('few-shot'))
    undecided = set()
    for m in ('smollm2-135m', 'gemma3-270m'):
        df = pd.read_csv(ROOT/'data'/'results'/f'wscplus_{m}.csv.gz', keep_default_na=False, na_values=[''])
        echoed = df.reply.fillna('').str.contains('[prompt echo:', regex=False)
        for r in df[(df.protocol != 'score') & echoed].itertuples():
            if getattr(r, 'prompt_format', '') == PRIMED: continue
            it = items[str(r.id)]
            prompt = '\n'.join(c for _, c in item_requests(it, r.strategy, shots, int(r.seed))[0].messages)
            if r.protocol == 'sc':
                reps, states = json.loads(r.reply), ['answer' if v != '-' else 'unparsed' for v in r.votes.split(',')]
            else:
                strict = {'digit_semicolon': 'answer', 'ambiguous_parse': 'failed', 'invalid_digit': 'failed'}
                reps, states = [r.reply], [strict.get(r.rule, 'unparsed')]
            if not all(_echo_cannot_matter(x, prompt, it['options'], s)
                       for x, s in zip(reps, states) if re.search(_MARK, x)):
                undecided.add((m, r.strategy, int(r.id)))
    assert undecided == {('smollm2-135m', 'few-shot-sc3', i) for i in (1791, 1839, 2404, 2489, 266, 335, 732)} | {
        ('smollm2-135m', 'toe-paper', i) for i in (1231, 2022, 2404, 2489)}
