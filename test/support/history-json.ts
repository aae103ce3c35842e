import { createRequire } from 'node:module';
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';

export type History = proto.temporal.api.history.v1.IHistory;

/**
 * A history file (`temporal workflow show --output json`, what test/histories/ holds) as the
 * History message Worker.runReplayHistories takes. @temporalio/common's own historyFromJSON uses
 * its copy of protobufjs, and npm installs @temporalio/proto with another copy: the two do not
 * recognise each other's types ("type must be a Type"). This parses with @temporalio/proto's copy.
 */
const protojson = createRequire(require.resolve('@temporalio/proto'))('protobufjs/ext/protojson') as {
  fromJson(type: unknown, json: unknown, options: { ignoreUnknownFields: boolean }): History | null;
};
const historyType = (patchProtobufRoot(proto) as unknown as { lookupType(name: string): unknown }).lookupType(
  'temporal.api.history.v1.History',
);

export function historyFromFile(json: unknown): History {
  const history = protojson.fromJson(historyType, json, { ignoreUnknownFields: true });
  if (history === null) throw new TypeError('not a history');
  return history;
}
