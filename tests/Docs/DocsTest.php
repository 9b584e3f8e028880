<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Docs;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;

/**
 * The documentation's links cannot rot and its commands are the ones CI runs: README.md and
 * docs/**\/*.md checked by MarkdownDocs, and the checker itself on the repositories of
 * fixtures/: broken/ has one problem of each kind (and things that look like problems and are
 * not), clean/ none.
 */
final class DocsTest extends TestCase
{
    private const FIXTURES = __DIR__ . '/fixtures';

    public function testTheReadmeAndTheDocsHaveNoProblem(): void
    {
        $docs = new MarkdownDocs(\dirname(__DIR__, 2));
        self::assertContains('README.md', $docs->documents());
        $problems = $docs->problems();

        self::assertSame([], $problems, \count($problems) . " problems in the documentation (php tests/Docs/check.php lists them):\n" . \implode("\n", $problems));
    }

    public function testEveryKindOfProblemIsReportedAtItsLine(): void
    {
        self::assertSame(
            [
                'README.md:4: link to "docs/missing.md": no such file or folder as docs/missing.md',
                'README.md:5: link to "#no-such-heading": no heading or anchor "no-such-heading" in README.md',
                'README.md:6: link to "docs/usage.md#no-such-heading": no heading or anchor "no-such-heading" in docs/usage.md',
                'README.md:10: link to "docs/images/absent.png": no such file or folder as docs/images/absent.png',
                'README.md:11: link to "docs/old/": no such file or folder as docs/old',
                'README.md:12: link to "../../../outside.md": it leaves the repository',
                'README.md:13: the reference [nothing] of [an undefined reference] is defined nowhere in this file (a line "[nothing]: path")',
                'README.md:16: link to "tests/run.sh#L40": tests/run.sh has 2 lines',
                'README.md:17: link to "#not-a-heading": no heading or anchor "not-a-heading" in README.md',
                'README.md:21: link to "docs/stale.md": no such file or folder as docs/stale.md',
                'docs/usage.md:5: link to "../README.md#setup-2": no heading or anchor "setup-2" in README.md',
                'docs/usage.md:23: the command "make install-everything" is run by no test or CI script; run it in one, or mark the block "# Example"',
                'docs/usage.md:24: the command "bash tests/run.sh --testsuite docs,native" is run by no test or CI script; run it in one, or mark the block "# Example"',
                'docs/usage.md:29: the command "bash tests/named-in-a-comment.sh" is run by no test or CI script; run it in one, or mark the block "# Example"',
                'docs/usage.md:37: a Mermaid block starting with "flowchat", no diagram type Mermaid knows (flowchart, graph, sequenceDiagram, classDiagram, stateDiagram ...)',
                'docs/usage.md:42: an empty Mermaid block',
            ],
            (new MarkdownDocs(self::FIXTURES . '/broken'))->problems(),
        );
    }

    /**
     * What the broken fixture holds that looks like a problem and is none (a repeated heading's
     * anchor, a link in code, a marked example, a command CI runs): there, and not reported.
     */
    public function testWhatIsNoProblemIsReadAsSuch(): void
    {
        $root = self::FIXTURES . '/broken';
        $readme = (string) \file_get_contents($root . '/README.md');
        $usage = (string) \file_get_contents($root . '/docs/usage.md');
        $docs = new MarkdownDocs($root);
        $before = $docs->problems(['README.md']);

        // The second "Setup" heading is #setup-1, as GitHub numbers a repeated heading.
        self::assertStringContainsString('[Second setup](#setup-1)', $readme);
        self::assertStringContainsString('[first](#setup)', $readme);
        // A heading's code and punctuation are dropped from its anchor.
        self::assertStringContainsString('## The API: `isAvailable()` and more!', $usage);
        self::assertStringContainsString('(docs/usage.md#the-api-isavailable-and-more)', $readme);
        // A link in a code block or a code span, or to a site, is not followed.
        self::assertStringContainsString('[In a code block](nowhere.md)', $readme);
        self::assertStringContainsString('`[inline code](nowhere.md)`', $readme);
        self::assertStringContainsString('(https://example.com/missing)', $readme);
        foreach ($before as $problem) {
            self::assertStringNotContainsString('nowhere.md', $problem);
            self::assertStringNotContainsString('setup-1', $problem);
            self::assertStringNotContainsString('the-api', $problem);
            self::assertStringNotContainsString('custom-anchor', $problem);
            self::assertStringNotContainsString('example.com', $problem);
            self::assertStringNotContainsString('diagram.svg', $problem);
            self::assertStringNotContainsString('docs/usage.md#usage', $problem);
            self::assertStringNotContainsString('#L2"', $problem);
        }
        // A marked example, a command CI runs (a "$ " prompt and a line continued with "\"
        // joined, output left out), a known diagram: no problem on their lines.
        $usageLines = \array_map(static fn (string $p): int => (int) \explode(':', $p)[1], $docs->problems(['docs/usage.md']));
        foreach ([8, 12, 13, 14, 19, 33] as $line) {
            self::assertNotContains($line, $usageLines, "docs/usage.md:{$line} is no problem");
        }
    }

    /**
     * A ```files block gives every source file a line and names nothing that is gone: a path
     * indented under a folder or beside a file resolved against it, a description going on
     * read as no entry.
     */
    public function testTheFileMapHasALineForEverySourceFileAndNamesNothingGone(): void
    {
        self::assertSame(
            [
                'docs/design.md:3: the file map has no line for crates/one/src/unlisted.rs',
                'docs/design.md:3: the file map has no line for src/unlisted.rs',
                'docs/design.md:6: the file map names crates/one/src/gone.rs, which is not in the repository',
            ],
            (new MarkdownDocs(self::FIXTURES . '/map'))->problems(),
        );
    }

    public function testAnchorsAreGitHubsSlugsOfTheHeadings(): void
    {
        self::assertSame('install', MarkdownDocs::slug('Install'));
        self::assertSame('apache-with-mod_php', MarkdownDocs::slug('Apache with mod_php'));
        self::assertSame('thread-safe-php-frankenphp-apaches-event-mpm', MarkdownDocs::slug("Thread-safe PHP: FrankenPHP, Apache's event MPM"));
        self::assertSame('the-redis-it-syncs-through-tls-acl-users-sentinel-valkey', MarkdownDocs::slug('The Redis it syncs through: TLS, ACL users, Sentinel, Valkey'));
        self::assertSame('1000-services--each-on-one', MarkdownDocs::slug('1,000 services — each on one'));
        self::assertSame('état-du-circuit', MarkdownDocs::slug('État du circuit'));
    }

    public function testTheCommandLineCheckExitsOneWithTheProblemsAndZeroWithout(): void
    {
        $broken = $this->check(self::FIXTURES . '/broken');
        self::assertSame(1, $broken['exit'], $broken['stderr']);
        self::assertSame((new MarkdownDocs(self::FIXTURES . '/broken'))->problems(), \explode("\n", \rtrim($broken['stdout'], "\n")));
        self::assertSame("check: 16 problems in README.md, docs/usage.md\n", $broken['stderr']);

        $clean = $this->check(self::FIXTURES . '/clean');
        self::assertSame(0, $clean['exit'], $clean['stdout'] . $clean['stderr']);
        self::assertSame('', $clean['stdout']);
        self::assertSame("check: 0 problems in README.md, docs/usage.md\n", $clean['stderr']);

        $missing = $this->check(self::FIXTURES . '/no-such-repository');
        self::assertSame(2, $missing['exit']);
        self::assertStringContainsString('no-such-repository is not a directory', $missing['stderr']);
    }

    /** @return array{exit: int, stdout: string, stderr: string} */
    private function check(string $root): array
    {
        return Command::run([\PHP_BINARY, __DIR__ . '/check.php', $root], timeout: 30.0);
    }
}
