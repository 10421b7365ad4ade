/** Globs as the Python side matches them (`fnmatch.fnmatchcase`): `*`, `?`, `[set]` and `[!set]`, case
 *  sensitive, over the whole name. Policies, `requiresApproval`, `retryable` and `undo` all use them. */

import { ValidationError } from './errors.js';

const compiled = new Map<string, RegExp>();

export function globMatches(name: string, glob: string): boolean {
  let pattern = compiled.get(glob);
  if (pattern === undefined) {
    pattern = new RegExp(`^${translate(glob)}$`, 's');
    compiled.set(glob, pattern);
  }
  return pattern.test(name);
}

/** A glob checked as `agentrein_core.policies.validate_glob` checks one. */
export function checkedGlob(field: string, glob: unknown): string {
  if (typeof glob !== 'string' || !glob.trim()) {
    throw new ValidationError(field, 'a glob must be a non-empty string');
  }
  if (glob.length > 500 || glob.includes('\0')) {
    throw new ValidationError(field, 'a glob must be at most 500 characters, with no NUL');
  }
  if (glob.replace(/\[!?\]?[^\]]*\]/g, '').includes('[')) {
    throw new ValidationError(field, `'${glob}' has a '[' with no closing ']'`);
  }
  return glob;
}

function translate(glob: string): string {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') out += '.*';
    else if (c === '?') out += '.';
    else if (c === '[') {
      let j = i + 1;
      if (glob[j] === '!') j++;
      if (glob[j] === ']') j++;
      while (j < glob.length && glob[j] !== ']') j++;
      if (j >= glob.length) {
        out += '\\[';
        continue;
      }
      let set = glob.slice(i + 1, j).replace(/\\/g, '\\\\');
      if (set.startsWith('!')) set = `^${set.slice(1)}`;
      else if (set.startsWith('^')) set = `\\${set}`;
      out += `[${set}]`;
      i = j;
    } else out += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return out;
}
