// Measures the knowledge base: syncs a folder into a scratch collection, asks the retrieval each
// labelled question, and reports recall@3 and MRR; with a real model configured (DRAFT_PROVIDER)
// it drafts each question too and reports hand-off precision and recall and citation validity.
// With the offline drafter the drafting checks the plumbing only, and says so.
//
//   npm run eval                                             the bundled help centre (examples/knowledge/)
//   npm run eval -- --held-out                               the same articles, the held-out questions
//   npm run eval -- --held-out-N                             … one of the other held-out sets (N: 2 to 37, the files there;
//                                                            docs/knowledge.md says how each was written and measured)
//   … [--floor 1.0] [--calibrate]                            the relevance floor; the floor this set would choose
//   npm run eval -- --knowledge <dir> --questions <file.jsonl> [--language english] [--dev]
//   … [--synonyms <file>] [--no-synonyms]                    a synonyms file for the scratch collection;
//                                                            the bundled set uses examples/knowledge/synonyms.txt
//                                                            when it exists, unless --no-synonyms
//   … [--handoff-topics <file>] [--no-handoff-topics]        topics a person answers (HANDOFF_TOPICS' format);
//                                                            the bundled set uses examples/knowledge/handoff-topics.txt
//   … [--handoff-examples <file,…>] [--no-handoff-examples]  labelled mail the hand-offs are learned from
//                                                            (HANDOFF_EXAMPLES); the bundled set learns from the
//                                                            bundled question sets, never from the measured one
//
// The question file: one JSON object per line, {"text": "…", "expected_sources": ["returns/window.md"],
// "handoff": false}. The last line of output is machine-readable:
//   recall@3=0.93 mrr=0.81 handoff_precision=… handoff_recall=… questions=80
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { judgeAnswer } from '../activities/draft/drafting/answer';
import { createDrafter } from '../activities/draft/drafting/create-drafter';
import type { Drafter } from '../activities/draft/drafting/drafter';
import {
  createEmbedder,
  embedMissing,
  type Embedder,
  parseQuestions,
  readFolder,
  readSynonymFile,
  BUNDLED_HELP_CENTRE_TOPICS,
  DEFAULT_RELEVANCE_FLOOR,
  detectLanguage,
  relevanceVerdict,
  retrieveWithRelevance,
  SHARE_THAT_COVERS_UNKNOWN_WORDS,
  UNKNOWN_WORDS_FOR_HANDOFF,
  scoreEvaluation,
  summaryLine,
  syncCollection,
  syncSynonyms,
  type EvalScores,
  type LabelledQuestion,
  type QuestionOutcome,
  bundledQuestionSets,
} from '../knowledge';
import { createDb, type Db } from '../lib/db';
import { readHandoffTopics } from '../lib/handoff-topics';
import { handoffBeforeDrafting, ownWordsOf } from '../activities/draft/customer-mail';
import { learnHandoffs, type LearnedHandoffs } from '../lib/learned-handoffs';
import { readExampleFiles } from '../lib/learned-handoffs/examples';
import { isAutoReplySubject } from '../activities/decide/reply-policy';
import { messageOf, runMain, SetupError } from './services/main';
import { knowledgeConfigFor } from './services/knowledge-config';

const ROOT = path.resolve(__dirname, '..');
const bundledFile = (name: string) => path.join(ROOT, 'examples', 'knowledge', name);
export const BUNDLED = {
  knowledge: bundledFile('help-centre'),
  questions: bundledFile('questions.jsonl'),
  /**
   * Questions written blind, by a session that saw only the articles (not the retrieval, not the
   * bundled questions): the bundled set was written beside the retrieval it measures, so this one
   * said what a team's own mail would score — until issue 37's rounds tuned on it: a tuned set now.
   */
  heldOut: bundledFile('questions-held-out.jsonl'),
};

/**
 * `--held-out`, `--held-out-2`, `--held-out-3` …: the bundled help centre with one of its held-out
 * sets (examples/knowledge/questions-held-out-N.jsonl, read from the folder so a set added is a flag
 * without an edit here), each written blind by a session that saw only the articles; from held-out
 * 4 on, each was measured once before anything was tuned on it (docs/knowledge.md says when and on
 * which build).
 */
export const HELD_OUT_SETS: Readonly<Record<string, string>> = Object.fromEntries([
  ['held-out', BUNDLED.heldOut],
  ...readdirSync(bundledFile('.'))
    .flatMap((name) => /^questions-held-out-(\d+)\.jsonl$/.exec(name)?.[1] ?? [])
    .map(Number)
    .sort((a, b) => a - b)
    .map((n): [string, string] => [`held-out-${n}`, bundledFile(`questions-held-out-${n}.jsonl`)]),
]);
/** The bundled help centre's synonym groups: used by the bundled runs when the file exists. */
export const BUNDLED_SYNONYMS = bundledFile('synonyms.txt');

export interface EvalOptions {
  knowledge: string;
  questions: string;
  language: string;
  /** How many articles the drafter is shown (KNOWLEDGE_TOP_K). */
  topK: number;
  /** Null: retrieval only. The offline drafter runs the plumbing; a model gives real hand-off figures. */
  drafter: Drafter | null;
  /** Optional embeddings (KNOWLEDGE_EMBEDDINGS_*): the scratch collection is embedded and retrieval re-ranks. */
  embedder?: Embedder | null;
  /** Optional synonyms file (the KNOWLEDGE_SYNONYMS format), loaded into the scratch collection. */
  synonyms?: string | null;
  /** The relevance floor of the scratch collection (KNOWLEDGE_RELEVANCE_FLOORS' `*`, else the calibrated default). */
  floor?: number;
  /** Optional topics a person answers (a HANDOFF_TOPICS file): such a question is a hand-off before drafting, as live. */
  handoffTopics?: string | null;
  /**
   * Optional files of labelled mail the hand-offs are learned from (HANDOFF_EXAMPLES' format). A
   * question of the measured set is never among the examples it is judged by: any example with the
   * text of one is left out, so a bundled set is measured by what the others taught.
   */
  handoffExamples?: readonly string[] | null;
  log?: (line: string) => void;
}

export interface EvalReport {
  scores: EvalScores;
  /** Whether the hand-off figures come from a real model (not the offline drafter). */
  modelJudged: boolean;
  /** The relevance floor used; with the offline drafter the hand-off figures are the floor's. */
  floor: number;
  /** Each question's relevance score (the floor's input), in the file's order: for calibrating a floor. */
  relevance: number[];
  /**
   * Whether each question was left to a person before drafting — a topic a person answers, or an
   * out-of-office reply, which the reply policy never answers (isAutoReplySubject) — so the floor
   * never sees those.
   */
  handedOffEarly: boolean[];
  /** Each question's outcome, in the file's order. */
  outcomes: QuestionOutcome[];
  /** The synonyms file used and its groups; null: none. */
  synonyms: { file: string; groups: number } | null;
  /** The examples the hand-offs were learned from, and how many were left out as the measured set's own; null: none. */
  handoffExamples: { files: number; examples: number; leftOut: number } | null;
  /** The topics file used and its topics; null: none. */
  handoffTopics: { file: string; topics: number } | null;
  line: string;
}

/** Syncs the folder into a scratch collection (dropped afterwards), runs every question, scores them. */
export async function runEvaluation(db: Db, options: EvalOptions): Promise<EvalReport> {
  const log = options.log ?? (() => undefined);
  const questions = parseQuestions(readFileSync(options.questions, 'utf8'));
  const groups = options.synonyms ? await readSynonymFile(options.synonyms) : null;
  const topics = options.handoffTopics ? readHandoffTopics(options.handoffTopics) : [];
  const { learned, handoffExamples } = learnWithout(questions, options.handoffExamples ?? []);
  const collection = `eval-${randomBytes(4).toString('hex')}`;
  const { documents, problems } = await readFolder(options.knowledge);
  for (const problem of problems) log(`skipped ${problem.source}: ${problem.problem}`);
  const known = new Set(documents.map((d) => d.source));
  const unknown = [...new Set(questions.flatMap((q) => q.expected_sources))].filter((s) => !known.has(s));
  if (unknown.length > 0) log(`expected sources not in the folder (counted as misses): ${unknown.join(', ')}`);
  try {
    const stats = await syncCollection(db, { collection, language: options.language, documents });
    log(`synced ${stats.added} articles (${stats.sections} sections) into the scratch collection ${collection}`);
    if (groups) await syncSynonyms(db, collection, groups);
    const synonyms = options.synonyms && groups ? { file: options.synonyms, groups: groups.length } : null;
    log(synonyms ? `synonyms: ${synonyms.file} (${synonyms.groups} groups)` : 'synonyms: none');
    const handoffTopics = options.handoffTopics ? { file: options.handoffTopics, topics: topics.length } : null;
    log(
      handoffTopics
        ? `topics a person answers: ${handoffTopics.file} (${handoffTopics.topics})`
        : 'topics a person answers: none',
    );
    log(
      handoffExamples
        ? `hand-offs learned from ${handoffExamples.examples} examples in ${handoffExamples.files} files (${handoffExamples.leftOut} left out: the measured questions)`
        : 'hand-offs learned from: no examples',
    );
    if (options.embedder)
      log(`embedded ${await embedMissing(db, collection, options.embedder)} sections with ${options.embedder.name}`);
    const outcomes: QuestionOutcome[] = [];
    const floor = options.floor ?? DEFAULT_RELEVANCE_FLOOR;
    const relevanceScores: number[] = [];
    const handedOffEarly: boolean[] = [];
    for (const question of questions) {
      const retrieval = await retrieveWithRelevance(db, {
        collections: [collection],
        text: question.text,
        limit: 10,
        embedder: options.embedder ?? null,
      });
      const found = retrieval.sections;
      relevanceScores.push(retrieval.relevance[0]?.score ?? 0);
      const outcome: QuestionOutcome = { retrieved: found.map((s) => s.source) };
      // Live, an out-of-office reply is skipped before any of this (reply-policy.ts), and a topic a
      // person answers is handed off before any drafter is asked (compose-draft.ts): neither is answered.
      const early =
        isAutoReplySubject(subjectLineOf(question.text)) ||
        handoffBeforeDrafting(
          { language: { detected: null, reply: null }, unsupported: null, attachments: [] },
          { subject: '', text: question.text },
          { topics, learned },
        ) !== null;
      handedOffEarly.push(early);
      if (options.drafter) {
        const request = {
          inboxId: 'eval@replyonce.invalid',
          messageId: `eval-${outcomes.length + 1}`,
          subject: '',
          text: question.text,
          timestamp: new Date(),
          thread: [],
          knowledge: true,
          articles: found
            .slice(0, options.topK)
            .map((s) => ({ id: s.id, title: s.title, heading: s.heading, text: s.body })),
          relevance: relevanceVerdict(retrieval.relevance, { [collection]: floor }),
        };
        if (early) outcome.drafted = { handoff: true, citationsValid: true };
        else {
          const judged = judgeAnswer(await options.drafter.draft(request), request);
          const given = new Set(request.articles.map((a) => a.id));
          outcome.drafted = {
            handoff: judged.handoff !== null,
            citationsValid: judged.citations.every((c) => given.has(c)),
          };
        }
      }
      outcomes.push(outcome);
    }
    const scores = scoreEvaluation(questions, outcomes);
    const modelJudged = options.drafter !== null && options.drafter.name !== 'offline';
    // The offline drafter's hand-offs are the topics' and the relevance floor's, deterministic: real figures too.
    return {
      scores,
      modelJudged,
      floor,
      relevance: relevanceScores,
      handedOffEarly,
      outcomes,
      synonyms,
      handoffTopics,
      handoffExamples,
      line: summaryLine(scores),
    };
  } finally {
    await db.query('DELETE FROM knowledge_collections WHERE name = $1', [collection]);
  }
}

/** The hand-offs learned from the example files, none of the measured questions among the examples. */
function learnWithout(
  measured: readonly LabelledQuestion[],
  files: readonly string[],
): { learned: LearnedHandoffs | null; handoffExamples: EvalReport['handoffExamples'] } {
  if (files.length === 0) return { learned: null, handoffExamples: null };
  const measuredTexts = new Set(measured.map((q) => q.text));
  const all = readExampleFiles(files).flatMap((f) => f.examples);
  const kept = all.filter((e) => !measuredTexts.has(e.text));
  return {
    learned: learnHandoffs(ownWordsOf(kept)),
    handoffExamples: { files: files.length, examples: kept.length, leftOut: all.length - kept.length },
  };
}

/** A question's subject: its first line when that is a `Subject:` line (in a language the sets use), as the sets write it. */
export function subjectLineOf(text: string): string | undefined {
  const first = /^\s*(?:subject|betreff|objet|asunto|onderwerp|oggetto|assunto)\s*:\s*(.*)$/imu.exec(
    text.split('\n', 1)[0] ?? '',
  );
  return first?.[1];
}

/**
 * `--calibrate`: the floor that best separates this set's hand-off questions from its answerable
 * ones (the highest F1 of hand-off precision and recall, the lowest such floor) among the floors
 * that hand off at most MAX_FALSE_HANDOFFS of the answerable questions — unconstrained, a weak
 * separation picks a floor that hands most mail to a person — to put in KNOWLEDGE_RELEVANCE_FLOORS.
 * The figures are the whole decision's: a question a rule before the floor hands off (`decided`:
 * a topic a person answers, an out-of-office reply) is a hand-off at every floor, so the floor is chosen for what it adds
 * to them — over the questions they leave alone, the few hand-offs left made the best F1 a floor
 * that hands off many answerable questions to catch one more.
 */
const MAX_FALSE_HANDOFFS = 0.15;

export function calibrateFloor(
  scores: readonly number[],
  handoff: readonly boolean[],
  decided: readonly boolean[] = [],
): { floor: number; precision: number; recall: number } | null {
  const expected = handoff.filter(Boolean).length;
  if (expected === 0) return null;
  let best: { floor: number; precision: number; recall: number; f1: number } | null = null;
  for (const candidate of [null, ...[...new Set(scores)].sort((a, b) => a - b)]) {
    // Just above the candidate, so that score is below the floor; null first: no floor at all.
    const floor = candidate === null ? 0 : Math.round((candidate + 0.005) * 100) / 100;
    const predicted = scores.map((score, i) => decided[i] === true || score < floor);
    const truePositive = predicted.filter((p, i) => p && handoff[i]).length;
    const count = predicted.filter(Boolean).length;
    const precision = count ? truePositive / count : 0;
    const recall = truePositive / expected;
    const f1 = precision + recall ? (2 * precision * recall) / (precision + recall) : 0;
    if ((count - truePositive) / Math.max(1, handoff.length - expected) > MAX_FALSE_HANDOFFS) break;
    if (best === null || f1 > best.f1) best = { floor, precision, recall, f1 };
  }
  return best && { floor: best.floor, precision: best.precision, recall: best.recall };
}

/**
 * Recall@3 and MRR of the English questions and of the others (by knowledge/language.ts's
 * detection), so a set's figures say whether mail in another language is served as well (issue 37).
 */
function languageLine(report: EvalReport, questionsFile: string): string {
  const questions = parseQuestions(readFileSync(questionsFile, 'utf8'));
  const part = (keep: (language: string | undefined) => boolean) => {
    const picked = questions.flatMap((q, i) => (keep(detectLanguage(q.text)) ? [i] : []));
    const scores = scoreEvaluation(
      picked.map((i) => questions[i]!),
      picked.map((i) => report.outcomes[i]!),
    );
    return `${scores.answerable} answerable, recall@3 ${scores.recallAt3.toFixed(3)}, MRR ${scores.mrr.toFixed(3)}`;
  };
  return `by language: English ${part((l) => l === 'en')}; other or unknown ${part((l) => l !== 'en')}`;
}

function calibrationLine(report: EvalReport, questionsFile: string): string {
  const questions = parseQuestions(readFileSync(questionsFile, 'utf8'));
  const best = calibrateFloor(
    report.relevance,
    questions.map((q) => q.handoff),
    report.handedOffEarly,
  );
  const early = report.handedOffEarly.filter(Boolean).length;
  const over =
    early > 0 ? ` (with the ${early} questions handed off before drafting: topics, out-of-office replies)` : '';
  if (best !== null && best.floor === 0)
    return `no floor catches one more of this set's hand-offs${over} without losing F1 or handing off more than ${MAX_FALSE_HANDOFFS * 100} % of its answerable questions: set a floor of 0 to turn it off, or keep the default`;
  return best
    ? `calibrated floor ${best.floor.toFixed(2)}: hand-off precision ${best.precision.toFixed(3)}, recall ${best.recall.toFixed(3)} on this set${over} (KNOWLEDGE_RELEVANCE_FLOORS='{"*": ${best.floor.toFixed(2)}}')`
    : `no question of this set expects a hand-off: nothing to calibrate a floor on`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      knowledge: { type: 'string' },
      questions: { type: 'string' },
      language: { type: 'string' },
      dev: { type: 'boolean', default: false },
      ...Object.fromEntries(
        Object.keys(HELD_OUT_SETS).map((set) => [set, { type: 'boolean' as const, default: false }]),
      ),
      floor: { type: 'string' },
      calibrate: { type: 'boolean', default: false },
      synonyms: { type: 'string' },
      'no-synonyms': { type: 'boolean', default: false },
      'handoff-topics': { type: 'string' },
      'no-handoff-topics': { type: 'boolean', default: false },
      'handoff-examples': { type: 'string' },
      'no-handoff-examples': { type: 'boolean', default: false },
    },
  });
  if ((values.knowledge === undefined) !== (values.questions === undefined))
    throw new SetupError('give both --knowledge <dir> and --questions <file.jsonl>, or neither (the bundled set)');
  const heldOut = Object.keys(HELD_OUT_SETS).filter((set) => (values as Record<string, unknown>)[set] === true);
  if (heldOut.length > 0 && values.knowledge !== undefined)
    throw new SetupError(
      `--${heldOut[0]} is the bundled help centre with its held-out questions: give it alone, or --knowledge and --questions`,
    );
  if (heldOut.length > 1) throw new SetupError(`give one of --${heldOut.join(', --')}, not ${heldOut.length}`);
  const floorArgument = values.floor === undefined ? undefined : Number(values.floor);
  if (floorArgument !== undefined && !(Number.isFinite(floorArgument) && floorArgument >= 0))
    throw new SetupError(`--floor ${values.floor}: give a number of 0 or more (e.g. --floor 1.0)`);
  if (values.synonyms !== undefined && values['no-synonyms'])
    throw new SetupError('give --synonyms <file> or --no-synonyms, not both');
  // The bundled synonyms belong to the bundled articles: a team's own folder uses only its own --synonyms.
  const synonyms = values['no-synonyms']
    ? null
    : values.synonyms !== undefined
      ? path.resolve(values.synonyms)
      : values.knowledge === undefined && existsSync(BUNDLED_SYNONYMS)
        ? BUNDLED_SYNONYMS
        : null;
  if (values['handoff-topics'] !== undefined && values['no-handoff-topics'])
    throw new SetupError('give --handoff-topics <file> or --no-handoff-topics, not both');
  // Like the synonyms: the bundled topics belong to the bundled shop, as a worker answering from its folder loads them.
  const handoffTopics = values['no-handoff-topics']
    ? null
    : values['handoff-topics'] !== undefined
      ? path.resolve(values['handoff-topics'])
      : values.knowledge === undefined
        ? BUNDLED_HELP_CENTRE_TOPICS
        : null;
  if (values['handoff-examples'] !== undefined && values['no-handoff-examples'])
    throw new SetupError('give --handoff-examples <file,…> or --no-handoff-examples, not both');
  // Like the topics: the bundled question sets teach the bundled shop's hand-offs, as a worker answering from its folder learns them.
  const handoffExamples = values['no-handoff-examples']
    ? null
    : values['handoff-examples'] !== undefined
      ? values['handoff-examples'].split(',').flatMap((f) => (f.trim() === '' ? [] : [path.resolve(f.trim())]))
      : values.knowledge === undefined
        ? bundledQuestionSets()
        : null;
  const config = knowledgeConfigFor({ dev: values.dev === true });
  const drafter = createDrafter(config);
  const db = createDb(config.DATABASE_URL, { queryTimeoutMs: 120_000 });
  try {
    const questionsFile = path.resolve(
      values.questions ?? (heldOut[0] === undefined ? BUNDLED.questions : HELD_OUT_SETS[heldOut[0]]!),
    );
    const report = await runEvaluation(db, {
      knowledge: path.resolve(values.knowledge ?? BUNDLED.knowledge),
      questions: questionsFile,
      language: values.language ?? config.KNOWLEDGE_LANGUAGE,
      topK: config.KNOWLEDGE_TOP_K,
      drafter,
      embedder: createEmbedder(config),
      synonyms,
      handoffTopics,
      handoffExamples,
      floor: floorArgument ?? config.KNOWLEDGE_RELEVANCE_FLOORS['*'],
      log: (line) => console.log(line),
    }).catch((error: unknown) => {
      throw new SetupError(messageOf(error));
    });
    const s = report.scores;
    console.log(
      `retrieval over ${s.answerable} answerable questions of ${s.questions}: recall@3 ${s.recallAt3.toFixed(3)}, MRR ${s.mrr.toFixed(3)}`,
    );
    if (report.modelJudged)
      console.log(
        `drafted by ${drafter.name}: citation validity ${s.citationValidity?.toFixed(3) ?? 'n/a'}, hand-off precision ${s.handoffPrecision?.toFixed(3) ?? 'n/a'}, recall ${s.handoffRecall?.toFixed(3) ?? 'n/a'}`,
      );
    else
      console.log(
        `drafted by the ${drafter.name} drafter: its hand-offs are the topics' (${report.handoffTopics?.topics ?? 0}), the learned ones' (${report.handoffExamples?.examples ?? 0} examples) and the relevance floor's (${report.floor}; and ${UNKNOWN_WORDS_FOR_HANDOFF}+ words no article holds under a ${SHARE_THAT_COVERS_UNKNOWN_WORDS} share), hand-off precision ${s.handoffPrecision?.toFixed(3) ?? 'n/a'}, recall ${s.handoffRecall?.toFixed(3) ?? 'n/a'}; set DRAFT_PROVIDER for a model's`,
      );
    console.log(languageLine(report, questionsFile));
    if (values.calibrate) console.log(calibrationLine(report, questionsFile));
    console.log(report.line);
    return 0;
  } finally {
    await db.end();
  }
}

if (require.main === module) runMain(main);
