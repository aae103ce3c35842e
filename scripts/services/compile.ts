import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * Compiles the app with the project's tsc, as the production image does (`npm run build`), into a
 * folder of the caller's (`.data/bench/dist`, `.data/soak/dist`: never dist/, which others use).
 * Type errors are reported and the JavaScript is still used (noEmitOnError is off): a benchmark or
 * a soak of a work in progress measures what runs; lint is what refuses the type errors.
 */
export async function compileApp(options: {
  project: string;
  outDir: string;
  log: (line: string) => void;
}): Promise<string> {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', options.project, '--outDir', options.outDir], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const output = String((error as { stdout?: string }).stdout ?? error);
    if (!/error TS/.test(output)) throw error;
    options.log(
      `tsc reported type errors (the JavaScript was still emitted):\n${output.split('\n').slice(0, 5).join('\n')}`,
    );
  }
  return options.outDir;
}
