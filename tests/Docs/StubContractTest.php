<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Docs;

use PHPUnit\Framework\TestCase;

/**
 * Every function of stubs/ganesha_shm.stub.php opens its doc comment with a one-line contract,
 * and docs/usage.md's API table gives each the same line, so that the page a user reads and the
 * stubs an IDE shows cannot drift apart. The stubs are read as tokens, not loaded: they declare
 * the names the loaded extension registers.
 */
final class StubContractTest extends TestCase
{
    private const STUB = __DIR__ . '/../../stubs/ganesha_shm.stub.php';
    private const USAGE = __DIR__ . '/../../docs/usage.md';

    public function testEveryFunctionOfTheStubsOpensWithAOneLineContract(): void
    {
        $contracts = self::stubContracts(\file_get_contents(self::STUB));

        self::assertContains('loadLastFailureTime', \array_keys($contracts));
        self::assertContains('ganesha_shm_info', \array_keys($contracts));
        foreach ($contracts as $function => $contract) {
            self::assertNotNull($contract, "{$function}() in the stubs has no doc comment with a contract");
            self::assertMatchesRegularExpression('/^[A-Z].*\.$/', $contract, "{$function}()'s contract is one sentence");
        }
    }

    public function testTheUsagePageGivesEachFunctionTheContractOfTheStubs(): void
    {
        $stubs = self::stubContracts(\file_get_contents(self::STUB));
        $page = self::pageContracts(\file_get_contents(self::USAGE));

        self::assertSame(\array_keys($stubs), \array_keys($page), "docs/usage.md's API table lists the stubs' functions, in their order");
        foreach ($stubs as $function => $contract) {
            self::assertSame($contract, $page[$function], "{$function}(): docs/usage.md and the stubs differ");
        }
    }

    public function testAContractThatDiffersFromTheStubsIsSeen(): void
    {
        $stub = "<?php\nclass A {\n    /**\n     * Adds one.\n     *\n     * @throws \\Exception\n     */\n    public function increment(): void {}\n    public function bare(): void {}\n}\n";
        $page = "| method | contract |\n|---|---|\n| `increment(): void` | Adds two. |\n";

        self::assertSame(['increment' => 'Adds one.', 'bare' => null], self::stubContracts($stub));
        self::assertSame(['increment' => 'Adds two.'], self::pageContracts($page));
    }

    /**
     * Each function the stubs declare, in their order, with the first line of its doc comment
     * (null without one).
     *
     * @return array<string, ?string>
     */
    private static function stubContracts(string $code): array
    {
        $contracts = [];
        $comment = null;
        $tokens = \token_get_all($code);
        foreach ($tokens as $i => $token) {
            if (!\is_array($token)) {
                $comment = \in_array($token, ['{', '}', ';'], true) ? null : $comment;
                continue;
            }
            if ($token[0] === \T_DOC_COMMENT) {
                $comment = $token[1];
            } elseif ($token[0] === \T_FUNCTION) {
                $name = self::nextName($tokens, $i);
                $contracts[$name] = $comment === null ? null : self::firstLine($comment);
                $comment = null;
            }
        }

        return $contracts;
    }

    /** @param list<mixed> $tokens */
    private static function nextName(array $tokens, int $at): string
    {
        for ($i = $at + 1; $i < \count($tokens); $i++) {
            if (\is_array($tokens[$i]) && $tokens[$i][0] === \T_STRING) {
                return $tokens[$i][1];
            }
        }
        throw new \UnexpectedValueException('a function without a name');
    }

    private static function firstLine(string $comment): ?string
    {
        foreach (\preg_split('/\R/', $comment) as $line) {
            $line = \trim(\preg_replace('#^\s*(/\*\*|\*/|\*)#', '', $line));
            $line = \trim(\preg_replace('#\*/$#', '', $line));
            if ($line !== '') {
                return \str_starts_with($line, '@') ? null : $line;
            }
        }

        return null;
    }

    /**
     * The rows of a page's "| method | contract |" table: the function's name, then its contract.
     *
     * @return array<string, string>
     */
    private static function pageContracts(string $page): array
    {
        \preg_match_all('/^\| `([A-Za-z_]\w*)\(.*?` \| (.+) \|$/m', $page, $rows, \PREG_SET_ORDER);
        $contracts = [];
        foreach ($rows as [, $function, $contract]) {
            $contracts[$function] = $contract;
        }

        return $contracts;
    }
}
