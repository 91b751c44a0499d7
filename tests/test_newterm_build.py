"The NewTerm construction pipeline on scripted replies: released items round-trip, reruns are free, the CLI builds."
import json, subprocess, sys
import numpy as np
import pytest
from wordbench.core import stable_hash
from wordbench.models.cache import CachedLM
from wordbench.prompts import LETTERS
from wordbench.newterm.items import load_items
from wordbench.models.dummy import ScriptedLM
from wordbench.newterm.build import Pipeline, coma_candidates, csj_candidates, prompt_kind, run_pipeline


def toy_embed(texts):
    v = np.array([[int(stable_hash(t)[i:i + 2], 16) - 128 for i in range(0, 16, 2)] for t in texts], dtype=float)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def choose(text):
    "A filter reply choosing only the option whose line holds `text`."
    def reply(request):
        lines = request.messages[-1][1].splitlines()
        return next(l[0] for l in lines if l[:3] in {f'{x}. ' for x in LETTERS[:6]} and l[3:] == text) + '. Because.'
    return reply


def test_a_released_coma_item_comes_back_with_its_gold():
    it = load_items('COMA', [2022])[16]                  # "Juggers", split cause, gold D
    gold = it['choices'][it['gold']]
    others = [c for i, c in enumerate(it['choices']) if i != it['gold']] + ['they wore long coats.', 'the shop closed.']
    related = ['Sleeves', 'Shorts', 'Cuffs', 'Collars', 'Pockets']
    script = {('coma_sentences', 'This happened because'): f"1. {it['question']} This happened because: {gold}",
              ('filter_coma', it['question']): choose(gold),
              **{('coma_distractor', r): d for r, d in zip(related, others)}}
    p = Pipeline(ScriptedLM(script, prompt_kind), None, toy_embed, max_tries=1)
    terms = [dict(term=it['term'], meaning=it['meaning'], type='new words not deduced', related=related)]
    out, = coma_candidates(p, terms)
    assert (out['question'], out['split'], out['choices'][out['gold']]) == (it['question'], 'cause', gold)
    assert len(out['choices']) == 4 and set(out['choices']) <= set(others) | {gold}


def test_released_csj_sentences_come_back_unchanged():
    items = load_items('CSJ', [2022])
    true = next(it for it in items if it['label'] == 'True')
    false = next(it for it in items if it['label'] == 'False' and it['term'] == true['term'] and it['question'] != '') \
        if any(it['label'] == 'False' and it['term'] == true['term'] for it in items) else None
    false_q = false['question'] if false else true['question'].replace('.', ', they said wrongly.')
    script = {('sentences', true['term']): '1. ' + true['question'],
              ('csj_wrong', true['term']): f'Wrong Sentence: {false_q}\nCorresponding Wrong meaning: other',
              ('filter_csj', true['question']): '9', ('filter_csj', false_q): '2'}
    p = Pipeline(ScriptedLM(script, prompt_kind), None, toy_embed, max_tries=1)
    out = csj_candidates(p, [dict(term=true['term'], meaning=true['meaning'], type=true['term_type'], related=[])])
    assert [(c['question'], c['gold']) for c in out] == [(true['question'], True), (false_q, False)]


def test_a_rerun_reads_every_reply_from_the_cache(tmp_path):
    script = {('sentences', 'wokely'): '1. The goods looked wokely to everyone.\n2. His wokely effort failed badly.'}
    inner = ScriptedLM(script, prompt_kind)
    lm = CachedLM(inner, path=tmp_path/'c.sqlite')
    terms = [dict(term='wokely', meaning='paltry', type='new words not deduced')]
    related = {'wokely': ['poor', 'worthy', 'splendid', 'cheap', 'grand']}
    first = run_pipeline(Pipeline(lm, lm, toy_embed, max_tries=2), terms, related=related)
    asked = inner.counters['generate']
    assert asked > 0
    again = run_pipeline(Pipeline(lm, lm, toy_embed, max_tries=2), terms, related=related)
    assert inner.counters['generate'] == asked and again == first


def test_the_cli_builds_and_writes_a_funnel(tmp_path):
    p = subprocess.run([sys.executable, '-m', 'wordbench.cli', 'build', 'newterm', '--backend', 'dummy',
                        '--model', 'toy', '--scorer', 'toy', '--scorer-backend', 'dummy', '--sample', '1',
                        '--out', str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary['n_terms'] == 3
    report = json.loads((tmp_path/'report.json').read_text())
    stages = {(r['task'], r['stage']) for r in report['funnel']}
    assert {('terms', 'deduce'), ('terms', 'related'), ('COMA', 'sentences'), ('CSJ', 'true sentences')} <= stages
    for f in ('COMA.jsonl', 'COST.jsonl', 'CSJ.jsonl', 'new_terms.jsonl', 'funnel.csv'): assert (tmp_path/f).exists()


def test_a_failed_run_resumes_from_its_stage_files_without_asking_again(tmp_path, monkeypatch):
    "A run that fails in its last task leaves stage files; the rerun reads them back and asks no call twice."
    from wordbench.core import read_jsonl
    from wordbench.newterm import build
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp_path/'cache'))
    kw = dict(sample=1, backend='dummy', model='toy', scorer='toy', scorer_backend='dummy', out=tmp_path/'out',
              tasks=['COMA', 'CSJ'])
    real = build.csj_candidates
    def broken(p, terms):
        p.ask('CSJ', 'true sentences', [p.request('probe', 'x', (('user', 'one call before the crash'),))])
        raise RuntimeError('killed')
    monkeypatch.setattr(build, 'csj_candidates', broken)
    with pytest.raises(RuntimeError, match='killed'): build.build_newterm(**kw)
    stages = sorted(p.stem for p in (tmp_path/'out'/'stages').iterdir())
    assert stages == ['COMA-candidates', 'COMA-selected', 'terms'], stages
    first = [r['key'] for _, r in read_jsonl(tmp_path/'out'/'calls.jsonl')]
    monkeypatch.setattr(build, 'csj_candidates', real)
    rep = build.build_newterm(**kw)
    assert rep['resumed_stages'] == ['terms', 'COMA-candidates', 'COMA-selected'], rep
    keys = [r['key'] for _, r in read_jsonl(tmp_path/'out'/'calls.jsonl')]
    assert len(keys) > len(first) and len(set(keys)) == len(keys)   # the rerun asked only what was new
    assert not (tmp_path/'out'/'stages').exists()
    assert json.loads((tmp_path/'out'/'report.json').read_text())['items'].keys() == {'COMA', 'CSJ'}


def test_a_scorer_that_refuses_an_empty_context_does_not_break_perplexity_selection():
    "Like `openai` on text prompts: an empty context is refused, so the text after the first word is scored."
    from wordbench.core import UserError
    from wordbench.models.lm import get_lm
    from wordbench.newterm.build import select_by_perplexity
    dummy = get_lm('dummy', 'toy')
    class NoEmptyContext(type(dummy)):
        def loglikelihood(self, requests, progress=None):
            if any(not r.context for r in requests): raise UserError('needs a context', 'give one')
            self.seen = list(requests)
            return super().loglikelihood(requests)
    scorer = NoEmptyContext('toy')
    p = Pipeline(None, scorer, toy_embed)
    cands = [dict(term='t', meaning='m', question=q, gold=True, type='x') for q in ('A t walks home.', 'The t sings.')]
    out = select_by_perplexity(p, 'CSJ', cands)
    assert len(out) == 1 and np.isfinite(out[0]['ppl'])
    assert [(r.context, r.continuation) for r in scorer.seen] == [('A', ' t walks home.'), ('The', ' t sings.')]
    stages = set(p.funnel.table().stage)
    assert any(s.startswith('perplexity: scored after the first word') for s in stages), stages


def test_the_csj_rewrite_is_asked_in_the_authors_conversation():
    "As in `3_CSJ_generation.py`: the rewrite's own system turn, the sentence prompt, the true sentences, the rewrite."
    from wordbench.newterm.build_prompts import construction_prompts
    true = 'The goods looked wokely to everyone.'
    script = {('sentences', 'wokely'): '1. ' + true, ('csj_wrong', 'wokely'): 'Wrong Sentence: A wokely palace.'}
    lm = ScriptedLM(script, prompt_kind)
    csj_candidates(Pipeline(lm, None, toy_embed, max_tries=1), [dict(term='wokely', meaning='paltry', type='x',
                                                                      related=['poor'])])
    asked, = lm.seen[('csj_wrong', 'wokely')]
    prompts = construction_prompts()
    assert asked.messages == (('system', prompts['csj_wrong'][0].format(n=3)),
                              ('user', prompts['sentences'][1].format(term='wokely', meaning='paltry', n=3,
                                                                      related='"poor"')),
                              ('assistant', true), ('user', prompts['csj_wrong'][1].format(term='wokely')))
    assert asked.messages[0][1] != prompts['sentences'][0].format(n=3)   # not the sentence prompt's system turn
