<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Docs;

/**
 * The checks of the documentation: README.md and every docs/**\/*.md of a repository, each
 * problem a line "FILE:LINE: what is wrong" (FILE relative to the repository).
 *
 *  - Links: every relative link (inline, reference-style, image, HTML <a href> and <img src>)
 *    names a file or folder of the repository, and its #anchor a heading of the Markdown file
 *    it names, by GitHub's slug rules, or an explicit <a id>/<a name> of it. http(s) and
 *    mailto links are not followed.
 *  - Commands: every command of a shell block (```sh, bash, shell, console) is run by the test
 *    suite or CI (it occurs in the text of a file CI runs, see SCRIPTS), unless the block's
 *    first line is a comment starting with "# Example": a command the documentation shows and
 *    nothing runs is one that can stop working unnoticed.
 *  - Mermaid: every ```mermaid block starts with a diagram type Mermaid knows.
 *  - The file map: a ```files block (docs/design.md's) gives every source file (SOURCES) a line
 *    of its own, and names nothing that is not there. A line names a path then says what it
 *    is; a path indented by two spaces is under the one above it (under a folder, or beside a
 *    file); a line indented further goes on with the description above.
 *
 * Fenced code blocks and inline code spans are text, not links. No PHPUnit, no extension: also
 * run by tests/Docs/check.php.
 */
final class MarkdownDocs
{
    /**
     * What the test suite or CI runs, relative to the repository: .ci/run and what it sources,
     * the shell scripts of tests/ (.ci/run runs run.sh, zts.sh, matrix.sh, model-check.sh; the
     * tests run the others), the PHPUnit tests (their commands, and the scripts they start), and
     * packaging/ (.ci/run builds the Debian package with packaging/deb.sh). benches/ is left
     * out: CI runs no benchmark (the fpm suite's chaos soak is started by a test, whose command
     * line is in tests/). tests/Docs/ is left out too: the docs suite's own files and fixtures
     * quote commands without running them. Comments are left out of every file: a command
     * named in a comment is not run.
     */
    public const SCRIPTS = ['.ci/*', 'tests/**/*.sh', 'tests/**/*.php', 'packaging/**'];
    private const SCRIPTS_EXCLUDED = ['tests/Docs/'];

    private const SHELL_FENCES = ['sh', 'bash', 'shell', 'console'];

    /** The source files a file map lists, relative to the repository. */
    public const SOURCES = ['src/**.rs', 'crates/*/src/**.rs', 'crates/*/src/**.lua', 'crates/*/tests/*.rs', 'crates/*/examples/*.rs'];

    /** Diagram types of Mermaid 11, as the first word of a diagram. */
    private const MERMAID_TYPES = [
        'flowchart', 'graph', 'sequenceDiagram', 'classDiagram', 'stateDiagram', 'stateDiagram-v2',
        'erDiagram', 'journey', 'gantt', 'pie', 'quadrantChart', 'requirementDiagram', 'gitGraph',
        'C4Context', 'C4Container', 'C4Component', 'C4Dynamic', 'C4Deployment', 'mindmap',
        'timeline', 'zenuml', 'sankey-beta', 'xychart-beta', 'block-beta', 'packet-beta', 'kanban',
        'architecture-beta', 'radar-beta', 'treemap-beta',
    ];

    private readonly string $root;

    /** @var array<string, list<string>> anchors of the Markdown files read, by path */
    private array $anchors = [];

    private ?string $scriptText = null;

    public function __construct(string $root)
    {
        $real = \realpath($root);
        if ($real === false || !\is_dir($real)) {
            throw new \InvalidArgumentException("{$root} is not a directory");
        }
        $this->root = $real;
    }

    /** README.md (when there is one) and every .md below docs/, relative to the root, sorted. */
    public function documents(): array
    {
        $files = \is_file($this->root . '/README.md') ? ['README.md'] : [];
        $docs = [];
        if (\is_dir($this->root . '/docs')) {
            $iterator = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($this->root . '/docs', \FilesystemIterator::SKIP_DOTS));
            foreach ($iterator as $file) {
                if ($file->isFile() && \str_ends_with($file->getFilename(), '.md')) {
                    $docs[] = \substr($file->getPathname(), \strlen($this->root) + 1);
                }
            }
        }
        \sort($docs);

        return [...$files, ...$docs];
    }

    /**
     * Every problem of the documents, in the order of the files and lines.
     *
     * @param list<string>|null $files paths relative to the root; null: documents()
     * @return list<string> "FILE:LINE: what is wrong"
     */
    public function problems(?array $files = null): array
    {
        $problems = [];
        foreach ($files ?? $this->documents() as $file) {
            $document = $this->parse($file);
            foreach ([...$this->linkProblems($file, $document), ...$this->blockProblems($file, $document)] as [$line, $message]) {
                $problems[] = [$file, $line, $message];
            }
        }
        // Sorted by file, then line, keeping the order of one line's problems.
        $order = \array_keys($problems);
        \usort($order, static fn (int $a, int $b): int => [$problems[$a][0], $problems[$a][1], $a] <=> [$problems[$b][0], $problems[$b][1], $b]);

        return \array_map(static fn (int $i): string => "{$problems[$i][0]}:{$problems[$i][1]}: {$problems[$i][2]}", $order);
    }

    /**
     * A GitHub heading anchor: the heading's text lowercased, every character but letters,
     * marks, digits, "_", "-" and spaces dropped, spaces turned to "-".
     */
    public static function slug(string $text): string
    {
        return \str_replace(' ', '-', (string) \preg_replace('/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/u', '', \mb_strtolower($text, 'UTF-8')));
    }

    /**
     * The lines of a Markdown file, its fenced blocks apart.
     *
     * @return array{
     *     lines: array<int, string>,
     *     blocks: list<array{line: int, info: string, body: list<array{int, string}>, closed: bool}>,
     *     headings: list<array{int, string}>
     * } lines: the lines outside fenced blocks, by number (from 1); blocks: each fenced block,
     *   its opening line and info string, and its lines with their numbers
     */
    private function parse(string $file): array
    {
        $text = (string) \file_get_contents($this->root . '/' . $file);
        $all = \preg_split('/\r\n|\n|\r/', $text) ?: [];
        $lines = [];
        $blocks = [];
        $headings = [];
        $block = null;
        $previous = null;   // the paragraph line before, for setext headings
        foreach ($all as $i => $line) {
            $number = $i + 1;
            if ($block !== null) {
                if (\preg_match('/^ {0,3}(' . \preg_quote($block['fence'][0], '/') . '{' . \strlen($block['fence']) . ',})\s*$/', $line) === 1) {
                    unset($block['fence']);
                    $block['closed'] = true;
                    $blocks[] = $block;
                    $block = null;
                } else {
                    $block['body'][] = [$number, $line];
                }
                continue;
            }
            if (\preg_match('/^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/', $line, $m) === 1) {
                $block = ['line' => $number, 'info' => \strtolower($m[2]), 'body' => [], 'closed' => false, 'fence' => $m[1]];
                $previous = null;
                continue;
            }
            $lines[$number] = $line;
            if (\preg_match('/^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/', $line, $m) === 1) {
                $headings[] = [$number, $m[1] ?? ''];
                $previous = null;
            } elseif ($previous !== null && \preg_match('/^ {0,3}(=+|-+)[ \t]*$/', $line) === 1) {
                $headings[] = [$number - 1, \trim($previous)];
                $previous = null;
            } elseif (\trim($line) === '' || \preg_match('/^ {0,3}([-*_])[ \t]*(\1[ \t]*){2,}$|^\s*[|>]/', $line) === 1) {
                $previous = null;
            } else {
                $previous = $line;
            }
        }
        if ($block !== null) {
            unset($block['fence']);
            $blocks[] = $block;
        }

        return ['lines' => $lines, 'blocks' => $blocks, 'headings' => $headings];
    }

    /**
     * The anchors a link may name in a Markdown file: its headings' slugs, a repeated one with
     * -1, -2 ..., and the id or name of its HTML elements.
     *
     * @return list<string>
     */
    private function anchors(string $file): array
    {
        if (isset($this->anchors[$file])) {
            return $this->anchors[$file];
        }
        $document = $this->parse($file);
        $anchors = [];
        $seen = [];
        foreach ($document['headings'] as [, $heading]) {
            $slug = self::slug(self::plainText($heading));
            $n = $seen[$slug] ?? 0;
            $seen[$slug] = $n + 1;
            $anchors[] = $n === 0 ? $slug : "{$slug}-{$n}";
        }
        foreach ($document['lines'] as $line) {
            \preg_match_all('/<[a-z][a-z0-9]*\b[^>]*?\s(?:id|name)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')/i', self::withoutCodeSpans($line), $m, \PREG_SET_ORDER);
            foreach ($m as $match) {
                $anchors[] = ($match[2] ?? '') !== '' ? $match[2] : $match[1];
            }
        }

        return $this->anchors[$file] = $anchors;
    }

    /** A heading's text as GitHub renders it: code, links, images, HTML and emphasis reduced to their text. */
    private static function plainText(string $heading): string
    {
        $text = (string) \preg_replace('/(`+)(.+?)\1/', '$2', $heading);
        $text = (string) \preg_replace('/!?\[([^\]]*)\](\([^)]*\)|\[[^\]]*\])?/', '$1', $text);
        $text = (string) \preg_replace('/<[^>]+>/', '', $text);

        return (string) \preg_replace('/(\*+|(?<!\w)_+|_+(?!\w))/', '', $text);
    }

    /** $line with its inline code spans blanked, so that what they hold is not read as links. */
    private static function withoutCodeSpans(string $line): string
    {
        return (string) \preg_replace_callback('/(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)/', static fn (array $m): string => \str_repeat(' ', \strlen($m[0])), $line);
    }

    /**
     * @param array{lines: array<int, string>} $document
     * @return list<array{int, string}> [line, problem]
     */
    private function linkProblems(string $file, array $document): array
    {
        $lines = \array_map(self::withoutCodeSpans(...), $document['lines']);
        $definitions = [];   // label => true
        $links = [];         // [line, destination]
        foreach ($lines as $number => $line) {
            if (\preg_match('/^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)/', $line, $m) === 1) {
                $definitions[self::label($m[1])] = true;
                $links[] = [$number, \trim($m[2], '<>')];
                continue;
            }
            // Inline links and images: "](" then the destination, <...> or up to the first
            // space or unbalanced ")".
            if (\preg_match_all('/\]\(\s*(<[^>]*>|(?:[^\s()]|\((?:[^\s()])*\))*)/', $line, $m, \PREG_SET_ORDER) > 0) {
                foreach ($m as $match) {
                    $links[] = [$number, \trim($match[1], '<>')];
                }
            }
            if (\preg_match_all('/<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')/i', $line, $m, \PREG_SET_ORDER) > 0) {
                foreach ($m as $match) {
                    $links[] = [$number, ($match[2] ?? '') !== '' ? $match[2] : $match[1]];
                }
            }
        }
        $problems = [];
        foreach ($lines as $number => $line) {
            // [text][label] and [label][]; "]" then "[" with no space, as CommonMark wants.
            if (\preg_match_all('/\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[([^\[\]]*)\]/', $line, $m, \PREG_SET_ORDER) > 0) {
                foreach ($m as $match) {
                    $label = self::label($match[2] !== '' ? $match[2] : $match[1]);
                    if (!isset($definitions[$label])) {
                        $problems[] = [$number, "the reference [{$match[2]}] of [{$match[1]}] is defined nowhere in this file (a line \"[{$label}]: path\")"];
                    }
                }
            }
        }
        foreach ($links as [$number, $destination]) {
            $problem = $this->linkProblem($file, $destination);
            if ($problem !== null) {
                $problems[] = [$number, $problem];
            }
        }

        return $problems;
    }

    /** A reference label as CommonMark matches it: case-insensitive, whitespace collapsed. */
    private static function label(string $label): string
    {
        return \mb_strtolower((string) \preg_replace('/\s+/', ' ', \trim($label)), 'UTF-8');
    }

    /** What is wrong with a link of $file to $destination, or null. */
    private function linkProblem(string $file, string $destination): ?string
    {
        if (\preg_match('/^(https?|mailto):/i', $destination) === 1) {
            return null;
        }
        if ($destination === '') {
            return 'a link with no destination';
        }
        if (\preg_match('/^[a-z][a-z0-9+.-]*:/i', $destination) === 1) {
            return "link to \"{$destination}\": only relative links, http(s) and mailto are allowed";
        }
        [$path, $anchor] = \explode('#', $destination, 2) + [1 => null];
        $path = \rawurldecode((string) \preg_replace('/\?.*$/', '', $path));
        $anchor = $anchor === null ? null : \rawurldecode($anchor);
        if ($path === '') {
            $target = $file;
        } else {
            $target = self::normalize(\str_starts_with($path, '/') ? \substr($path, 1) : \dirname($file) . '/' . $path);
            if ($target === null) {
                return "link to \"{$destination}\": it leaves the repository";
            }
            if ($target !== '' && !\file_exists($this->root . '/' . $target)) {
                return "link to \"{$destination}\": no such file or folder as {$target}";
            }
        }
        if ($anchor === null || $anchor === '') {
            return null;
        }
        $shown = $target === '' ? 'the repository' : $target;
        if (!\is_file($this->root . '/' . $target)) {
            return "link to \"{$destination}\": an anchor into {$shown}, which is not a file";
        }
        if (!\str_ends_with($target, '.md')) {
            // GitHub's anchors of a line or lines of a file it shows as source.
            if (\preg_match('/^L(\d+)(?:-L(\d+))?$/', $anchor, $m) === 1) {
                $count = \count(\file($this->root . '/' . $target) ?: []);
                if ((int) $m[1] < 1 || (int) $m[1] > $count || (int) ($m[2] ?? 1) > $count) {
                    return "link to \"{$destination}\": {$target} has {$count} lines";
                }

                return null;
            }

            return "link to \"{$destination}\": {$target} is not Markdown, and #{$anchor} is no line anchor (#L12, #L12-L20)";
        }
        if (!\in_array($anchor, $this->anchors($target), true)) {
            return "link to \"{$destination}\": no heading or anchor \"{$anchor}\" in {$target}";
        }

        return null;
    }

    /** $path with "." and ".." resolved, relative to the root; null when it goes above the root. */
    private static function normalize(string $path): ?string
    {
        $parts = [];
        foreach (\explode('/', $path) as $part) {
            if ($part === '' || $part === '.') {
                continue;
            }
            if ($part === '..') {
                if ($parts === []) {
                    return null;
                }
                \array_pop($parts);
                continue;
            }
            $parts[] = $part;
        }

        return \implode('/', $parts);
    }

    /**
     * @param array{blocks: list<array{line: int, info: string, body: list<array{int, string}>, closed: bool}>} $document
     * @return list<array{int, string}> [line, problem]
     */
    private function blockProblems(string $file, array $document): array
    {
        $problems = [];
        foreach ($document['blocks'] as $block) {
            if (!$block['closed']) {
                $problems[] = [$block['line'], 'a code block opened here is never closed'];
            }
            if ($block['info'] === 'mermaid') {
                $first = null;
                foreach ($block['body'] as [, $line]) {
                    if (\trim($line) !== '' && !\str_starts_with(\ltrim($line), '%%')) {
                        $first = \trim($line);
                        break;
                    }
                }
                $type = $first === null ? '' : (string) \preg_split('/[\s;]/', $first)[0];
                if ($first === null) {
                    $problems[] = [$block['line'], 'an empty Mermaid block'];
                } elseif (!\in_array($type, self::MERMAID_TYPES, true) && $type !== '---') {
                    $problems[] = [$block['line'], "a Mermaid block starting with \"{$type}\", no diagram type Mermaid knows (" . \implode(', ', \array_slice(self::MERMAID_TYPES, 0, 5)) . ' ...)'];
                }
            }
            if ($block['info'] === 'files') {
                \array_push($problems, ...$this->mapProblems($block));
            }
            if (\in_array($block['info'], self::SHELL_FENCES, true)) {
                foreach ($this->commands($block) as [$number, $command]) {
                    if (!\str_contains($this->scriptText(), self::spaces($command))) {
                        $problems[] = [$number, "the command \"{$command}\" is run by no test or CI script; run it in one, or mark the block \"# Example\""];
                    }
                }
            }
        }

        return $problems;
    }

    /**
     * What is wrong with a file map: a path it names that is not in the repository (at its line),
     * a source file it has no line for (at the block's first line).
     *
     * @param array{line: int, body: list<array{int, string}>} $block
     * @return list<array{int, string}>
     */
    private function mapProblems(array $block): array
    {
        $problems = [];
        $listed = [];
        $base = '';
        foreach ($block['body'] as [$number, $line]) {
            if (\preg_match('/^( {0,2})(\S+)(\s|$)/', $line, $m) !== 1) {
                continue;   // blank, or the description above going on
            }
            $path = $m[1] === '' ? $m[2] : $base . $m[2];
            if ($m[1] === '') {
                $base = \str_ends_with($path, '/') ? $path : (\dirname($path) === '.' ? '' : \dirname($path) . '/');
            }
            if (!\file_exists($this->root . '/' . $path)) {
                $problems[] = [$number, "the file map names {$path}, which is not in the repository"];
            }
            $listed[\rtrim($path, '/')] = true;
        }
        foreach ($this->sourceFiles() as $file) {
            if (!isset($listed[$file])) {
                $problems[] = [$block['line'], "the file map has no line for {$file}"];
            }
        }

        return $problems;
    }

    /** @return list<string> the files of SOURCES, relative to the root, sorted */
    private function sourceFiles(): array
    {
        return $this->filesMatching(['src', 'crates'], self::SOURCES);
    }

    /**
     * The commands of a shell block, each with the line it starts on: none when its first line
     * is "# Example..."; lines continued with "\" joined; a "$ " prompt and a trailing comment
     * dropped. In a console block with prompts, only the lines with a prompt are commands (the
     * others are their output).
     *
     * @param array{info: string, body: list<array{int, string}>} $block
     * @return list<array{int, string}>
     */
    private function commands(array $block): array
    {
        $body = $block['body'];
        if ($body !== [] && \preg_match('/^\s*#\s*example/i', $body[0][1]) === 1) {
            return [];
        }
        $prompted = $block['info'] === 'console' && \array_filter($body, static fn (array $l): bool => \preg_match('/^\s*\$ /', $l[1]) === 1) !== [];
        $commands = [];
        $current = null;
        foreach ($body as [$number, $line]) {
            if ($current !== null) {
                $current[1] .= ' ' . $line;
            } else {
                if (\trim($line) === '' || \str_starts_with(\ltrim($line), '#')) {
                    continue;
                }
                $isPrompt = \preg_match('/^\s*\$ /', $line) === 1;
                if ($prompted && !$isPrompt) {
                    continue;
                }
                $current = [$number, $isPrompt ? (string) \preg_replace('/^\s*\$ /', '', $line) : $line];
            }
            if (\str_ends_with(\rtrim($current[1]), '\\')) {
                $current[1] = \substr(\rtrim($current[1]), 0, -1);
                continue;
            }
            $command = self::spaces(self::withoutComment($current[1]));
            if ($command !== '') {
                $commands[] = [$current[0], $command];
            }
            $current = null;
        }
        if ($current !== null && ($command = self::spaces(self::withoutComment($current[1]))) !== '') {
            $commands[] = [$current[0], $command];
        }

        return $commands;
    }

    /** A command line without its trailing comment: a " #" outside quotes. */
    private static function withoutComment(string $line): string
    {
        $quote = null;
        for ($i = 0, $n = \strlen($line); $i < $n; $i++) {
            $c = $line[$i];
            if ($quote !== null) {
                if ($c === $quote) {
                    $quote = null;
                } elseif ($c === '\\' && $quote === '"') {
                    $i++;
                }
            } elseif ($c === '\\') {
                $i++;
            } elseif ($c === '"' || $c === "'") {
                $quote = $c;
            } elseif ($c === '#' && ($i === 0 || \ctype_space($line[$i - 1]))) {
                return \substr($line, 0, $i);
            }
        }

        return $line;
    }

    private static function spaces(string $text): string
    {
        return \trim((string) \preg_replace('/\s+/', ' ', $text));
    }

    /** The text of SCRIPTS, comments left out, whitespace collapsed. */
    private function scriptText(): string
    {
        if ($this->scriptText !== null) {
            return $this->scriptText;
        }
        $texts = [];
        foreach ($this->scriptFiles() as $file) {
            $text = (string) \file_get_contents($this->root . '/' . $file);
            if (\str_contains($text, "\0")) {
                continue;
            }
            $texts[] = \str_ends_with($file, '.php') ? self::phpWithoutComments($text) : self::shellWithoutComments($text);
        }

        return $this->scriptText = self::spaces(\implode("\n", $texts));
    }

    /** @return list<string> the files of SCRIPTS, relative to the root */
    public function scriptFiles(): array
    {
        $files = $this->filesMatching(['.ci', 'tests', 'packaging'], self::SCRIPTS);

        return \array_values(\array_filter($files, static function (string $file): bool {
            foreach (self::SCRIPTS_EXCLUDED as $excluded) {
                if (\str_starts_with($file, $excluded)) {
                    return false;
                }
            }

            return true;
        }));
    }

    /**
     * The files below the folders $tops that match one of $patterns, relative to the root, sorted.
     *
     * @param list<string> $tops
     * @param list<string> $patterns
     * @return list<string>
     */
    private function filesMatching(array $tops, array $patterns): array
    {
        $files = [];
        foreach ($tops as $top) {
            if (!\is_dir($this->root . '/' . $top)) {
                continue;
            }
            $iterator = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($this->root . '/' . $top, \FilesystemIterator::SKIP_DOTS));
            foreach ($iterator as $entry) {
                $file = \substr($entry->getPathname(), \strlen($this->root) + 1);
                foreach ($patterns as $pattern) {
                    if ($entry->isFile() && self::globMatches($pattern, $file)) {
                        $files[] = $file;
                        break;
                    }
                }
            }
        }
        \sort($files);

        return $files;
    }

    /** "*" within a folder, "**\/" any folders (none too), "**" at the end anything below. */
    private static function globMatches(string $pattern, string $path): bool
    {
        $regex = \strtr(\preg_quote($pattern, '#'), ['\*\*/' => '(?:.*/)?', '\*\*' => '.*', '\*' => '[^/]*']);

        return \preg_match('#^' . $regex . '$#', $path) === 1;
    }

    private static function phpWithoutComments(string $code): string
    {
        $text = '';
        foreach (\token_get_all($code) as $token) {
            if (\is_array($token) && ($token[0] === \T_COMMENT || $token[0] === \T_DOC_COMMENT)) {
                continue;
            }
            $text .= \is_array($token) ? $token[1] : $token;
        }

        return $text;
    }

    /** A script without its lines that are comments (the shebang among them). */
    private static function shellWithoutComments(string $script): string
    {
        return (string) \preg_replace('/^\s*#.*$/m', '', $script);
    }
}
