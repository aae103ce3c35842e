/**
 * The contract: the one pure module every layer may import (workflows, activities, intake, api,
 * scripts). It imports nothing of ours and does no I/O, so workflow code can use all of it.
 */
export * from './workflow';
export * from './failures';
export * from './keys';
export * from './draft-text';
