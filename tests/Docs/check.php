<?php

/*
 * Checks the documentation, as the docs suite does: every relative link and #anchor of
 * README.md and docs/**\/*.md resolves, every command of their shell blocks is run by the test
 * suite or CI (or its block is marked "# Example"), every Mermaid block names a diagram type.
 *
 *   php tests/Docs/check.php [ROOT]
 *
 * ROOT: the repository to check (default: this one). Prints each problem as FILE:LINE: what is
 * wrong; exits 1 when there is one, 0 when there is none.
 */

declare(strict_types=1);

require __DIR__ . '/MarkdownDocs.php';

use Zeusi\GaneshaShmAdapter\Tests\Docs\MarkdownDocs;

$root = $argv[1] ?? \dirname(__DIR__, 2);
try {
    $docs = new MarkdownDocs($root);
} catch (\InvalidArgumentException $e) {
    \fwrite(\STDERR, 'check: ' . $e->getMessage() . \PHP_EOL);
    exit(2);
}
$problems = $docs->problems();
foreach ($problems as $problem) {
    echo $problem, \PHP_EOL;
}
\fprintf(\STDERR, "check: %d problem%s in %s\n", \count($problems), \count($problems) === 1 ? '' : 's', \implode(', ', $docs->documents()));
exit($problems === [] ? 0 : 1);
