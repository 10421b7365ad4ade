/** The SDK's modules import each other one way only: no import cycle, type-only imports included (issue 24;
 *  tests/test_layout.py keeps the Python side). A cycle makes the load order decide what a module sees and
 *  hides which module owns a type; break one by moving the shared type or value to the module that owns it. */

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';

const SOURCE = resolve(fileURLToPath(import.meta.url), '../../../src');

/** Every `.ts` file under `root`, as a path relative to it. */
function sources(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => file.split('\\').join('/'))
    .sort();
}

/** File -> the files of `root` it imports: `import`, `import type`, `export … from` and `import()` alike. */
function importGraph(root: string): Map<string, string[]> {
  const files = sources(root);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
    const targets = importedFiles
      .map((imported) => imported.fileName)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => relative(root, resolve(root, dirname(file), specifier.replace(/\.js$/, '.ts'))).split('\\').join('/'));
    graph.set(file, [...new Set(targets.filter((target) => files.includes(target)))]);
  }
  return graph;
}

/** One cycle through each strongly connected group of files (Tarjan), as `a.ts > b.ts > a.ts`. */
function importCycles(graph: Map<string, string[]>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (stack.includes(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const group: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        group.push(member);
      } while (member !== file);
      if (group.length > 1 || (graph.get(file) ?? []).includes(file)) groups.push(group.sort());
    }
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return groups.map((group) => cycleThrough(graph, group).join(' > ')).sort();
}

/** A path from the group's first file back to itself, staying inside the group. */
function cycleThrough(graph: Map<string, string[]>, group: string[]): string[] {
  const start = group[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const file = queue.shift()!;
    for (const next of graph.get(file) ?? []) {
      if (next === start) {
        const path = [file];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start];
      }
      if (group.includes(next) && !cameFrom.has(next)) {
        cameFrom.set(next, file);
        queue.push(next);
      }
    }
  }
  return group;
}

describe('the layout of sdk-ts/src', () => {
  it('has no import cycle, type-only imports included', () => {
    const graph = importGraph(SOURCE);
    assert.ok(graph.has('client.ts') && graph.has('connectors/stripe.ts'), `no sources found in ${SOURCE}`);
    assert.deepEqual(importCycles(graph), []);
  });

  it('names a cycle made of type-only imports, through a folder', () => {
    const root = mkdtempSync(join(tmpdir(), 'agentrein-layout-'));
    try {
      writeFileSync(join(root, 'a.ts'), "import type { B } from './inner/b.js';\nexport type A = B;\n");
      writeFileSync(join(root, 'c.ts'), "export type { A } from './a.js';\n");
      writeFileSync(join(root, 'leaf.ts'), 'export const leaf = 1;\n');
      mkdirSync(join(root, 'inner'));
      writeFileSync(join(root, 'inner', 'b.ts'), "import { type A } from '../a.js';\nimport { leaf } from '../leaf.js';\nexport type B = A | typeof leaf;\n");
      assert.deepEqual(importCycles(importGraph(root)), ['a.ts > inner/b.ts > a.ts']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
