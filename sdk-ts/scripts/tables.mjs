// The built-in MCP undo tables ship inside the package: copied from the repository's contract/mcp (which the
// Python connector reads too) into mcp-tables/, listed in package.json's `files`.
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const source = join(here, '..', '..', 'contract', 'mcp');
const target = join(here, '..', 'mcp-tables');
rmSync(target, { recursive: true, force: true });
mkdirSync(target);
for (const name of readdirSync(source).filter((n) => n.endsWith('.json'))) copyFileSync(join(source, name), join(target, name));
