"""End-to-end checks of the WinoDict build: reproducible to the byte, close to the paper's counts, honest about bad
user rows."""
import json, os, subprocess, sys, warnings
import pytest
from wordbench.core import project_root

FILES = ('winodict.jsonl', 'dropped.jsonl', 'report.json')
BUILD = 'import sys; from wordbench.winodict.build import build_winodict; build_winodict(sys.argv[1], seed=1)'


@pytest.fixture(scope='module')
def two_full_builds(tmp_path_factory):
    "Two full builds (WSC273 + WinoGrande dev, seed 1), run side by side in fresh processes with different hash seeds."
    dirs = [tmp_path_factory.mktemp(f'winodict{i}') for i in (1, 2)]
    procs = [subprocess.Popen([sys.executable, '-c', BUILD, str(d)], env={**os.environ, 'PYTHONHASHSEED': str(i)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i, d in zip((1, 2), dirs)]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-3000:]
    return dirs


def test_full_builds_are_byte_identical(two_full_builds):
    a, b = two_full_builds
    for f in FILES: assert (a/f).read_bytes() == (b/f).read_bytes(), f


def test_full_build_is_near_the_papers_table_1(two_full_builds):
    rep = json.loads((two_full_builds[0]/'report.json').read_text())
    paper = rep['paper_table1']
    assert set(rep['per_bucket']) == {f'prob{k}_of_5' for k in range(1, 6)}
    for bucket, counts in rep['per_bucket'].items():
        assert abs(counts['examples'] - paper['total']) <= 0.1 * paper['total'], (bucket, counts)
    for src in ('wsc', 'winogrande'):
        assert abs(rep['by_source_pos'][src]['total'] - paper[src]['total']) <= 0.1 * paper[src]['total'], src
    recs = [json.loads(l) for l in (two_full_builds[0]/'winodict.jsonl').read_text().splitlines()]
    assert len(recs) == sum(c['examples'] for c in rep['per_bucket'].values())
    for r in recs:
        assert r['sentence'].count('_') == 1 and r['original_sentence'].count('_') == 1, r['id']
        assert r['form'] in r['sentence'] and r['original_form'] in r['original_sentence'], r['id']
        assert r['label'] in (0, 1) and r['definition'], r['id']
    dropped = [json.loads(l) for l in (two_full_builds[0]/'dropped.jsonl').read_text().splitlines()]
    assert len(dropped) == rep['dropped_rows'] == sum(rep['dropped_by_reason'].values())


def test_committed_data_is_a_fresh_build(two_full_builds):
    "data/winodict/ is what the build makes today; regenerate with `wordbench build winodict`."
    committed = project_root()/'data'/'winodict'
    for f in FILES: assert (committed/f).read_bytes() == (two_full_builds[0]/f).read_bytes(), f'{f} is stale'


USER_ROWS = [
    dict(qID='A-1', sentence='Al beat Bo at chess because _ was stronger.', option1='Al', option2='Bo', answer='1'),
    dict(qID='A-2', sentence='Al beat Bo at chess because _ was weaker.', option1='Al', option2='Bo', answer='2'),
    dict(qID='B-1', sentence='Cy hid from Di because _ feared her.', option1='Cy', option2='Di', answer='1'),
    dict(qID='B-2', sentence='Cy hid from Di because _ scared her.', option1='Cy', option2='Di', answer='2'),
    dict(qID='D-1', sentence='Ed lent Fa a pen because _ was kind.', option1='Ed', option2='Fa', answer='1')]


def _build(out, **sources):
    from wordbench.winodict.build import build_winodict
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')   # the lenient loaders warn about the rows they skip
        return build_winodict(out, **sources)


def test_user_winogrande_file_reports_bad_rows(tmp_path):
    src = tmp_path/'mine.jsonl'
    lines = [json.dumps(r) for r in USER_ROWS]
    lines.insert(2, '{"qID": "C-1", "sentence": "no blank here", "option1": "Al"')   # malformed JSON
    src.write_text('\n'.join(lines) + '\n')
    rep = _build(tmp_path/'out', winogrande=src)
    assert rep['dropped_by_reason'] == {'malformed': 1, 'unpaired': 1}
    assert rep['by_source_pos'] == {'user': {'ADJ': 2, 'VERB': 2, 'total': 4}}
    assert rep['sources'][0]['source'] == 'user' and rep['sources'][0]['malformed'] == 1
    assert all(b['examples'] == 4 for b in rep['per_bucket'].values()) and len(rep['per_bucket']) == 5
    dropped = [json.loads(l) for l in (tmp_path/'out'/'dropped.jsonl').read_text().splitlines()]
    assert [(d['line'], d['reason']) for d in dropped] == [(3, 'malformed'), (6, 'unpaired')]
    recs = [json.loads(l) for l in (tmp_path/'out'/'winodict.jsonl').read_text().splitlines()]
    assert {r['source'] for r in recs} == {'user'} and len(recs) == 20
    for pair in ('A', 'B'):   # both twins share one root per bucket
        by_bucket = {}
        for r in recs:
            if r['pair_id'] == pair: by_bucket.setdefault(r['bucket'], set()).add(r['word'])
        assert all(len(w) == 1 for w in by_bucket.values()), by_bucket
    _build(tmp_path/'again', winogrande=src)
    for f in FILES: assert (tmp_path/'out'/f).read_bytes() == (tmp_path/'again'/f).read_bytes(), f


def test_user_wsc_file_reports_bad_schemas(tmp_path):
    def schema(pron, word, key):
        return (f'<schema><text><txt1>The trophy does not fit in the case because</txt1><pron>{pron}</pron>'
                f'<txt2>is too {word}.</txt2></text>'
                f'<answers><answer>The trophy</answer><answer>The case</answer></answers>'
                f'<correctAnswer>{key}</correctAnswer></schema>\n')
    src = tmp_path/'mine.xml'
    schemas = schema('it', 'large', 'A') + schema('it', 'small', 'B') + schema('', 'big', 'A')
    src.write_text('<collection>\n' + schemas + '</collection>\n', encoding='latin-1')
    rep = _build(tmp_path/'out', wsc=src)
    assert rep['dropped_by_reason'] == {'malformed': 1}
    assert rep['by_source_pos'] == {'user': {'ADJ': 2, 'total': 2}}
    recs = [json.loads(l) for l in (tmp_path/'out'/'winodict.jsonl').read_text().splitlines()]
    first = recs[0]
    assert first['original_sentence'] == 'The trophy does not fit in the case because _ is too large.'
    got = (first['option1'], first['option2'], first['label'], first['lemma'])
    assert got == ('the trophy', 'the case', 0, 'large')
