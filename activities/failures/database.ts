import { ApplicationFailure } from '@temporalio/activity';
import pg from 'pg';
import { FailureType } from '../../contract';

/**
 * Postgres errors that no retry can pass: a constraint the row breaks (SQLSTATE class 23) or
 * data the column cannot hold (class 22, e.g. a value too long, U+0000 in jsonb). Retried,
 * they would keep a message's workflow busy forever; as a typed, non-retryable failure
 * (`DatabaseRejected`) they end the run visibly in the Web UI instead. Everything else
 * (connection lost, timeouts, serialization failures, a Postgres restarting) may pass and is
 * left to the retry policy.
 *
 * The failure names the SQLSTATE, its condition and the constraint, table and column, never
 * Postgres's message or detail: those can quote the rejected value (`Key (x)=(…)`, `invalid
 * input syntax for type …: "…"`), which may be customer data.
 */

const CONDITIONS: Record<string, string> = {
  '22001': 'string_data_right_truncation',
  '22003': 'numeric_value_out_of_range',
  '22007': 'invalid_datetime_format',
  '22008': 'datetime_field_overflow',
  '22021': 'character_not_in_repertoire',
  '22P02': 'invalid_text_representation',
  '22P05': 'untranslatable_character',
  '23502': 'not_null_violation',
  '23503': 'foreign_key_violation',
  '23505': 'unique_violation',
  '23514': 'check_violation',
};

/** The non-retryable failure for a constraint or data error, or undefined for any other error. */
export function databaseRejection(error: unknown): ApplicationFailure | undefined {
  if (!(error instanceof pg.DatabaseError)) return undefined;
  const code = error.code ?? '';
  if (!/^2[23]/.test(code)) return undefined;
  const where = [
    error.constraint && `constraint ${error.constraint}`,
    error.table && `table ${error.table}`,
    error.column && `column ${error.column}`,
  ].filter(Boolean);
  return ApplicationFailure.create({
    type: FailureType.DatabaseRejected,
    message: `Postgres rejected the statement: SQLSTATE ${code} ${CONDITIONS[code] ?? (code.startsWith('23') ? 'integrity_constraint_violation' : 'data_exception')}${where.length > 0 ? ` (${where.join(', ')})` : ''}; retrying cannot change that`,
    nonRetryable: true,
    details: [{ sqlState: code, constraint: error.constraint ?? null, table: error.table ?? null }],
  });
}

/** Rethrows a constraint or data error as its non-retryable failure; any other error as it is. */
export function rethrowDatabaseRejection(error: unknown): never {
  throw databaseRejection(error) ?? error;
}
