<?php

/*
 * The holding proxy of the fleet tests (HoldingProxy, which documents what it is for), run as
 * `php -n holding_proxy.php <target port>`: a TCP proxy listening on a port of 127.0.0.1 that
 * the system picks (it binds port 0) which, for each connection it accepts, opens one to
 * 127.0.0.1:<target port> and forwards bytes both ways, except that it can hold what clients
 * send (the requests of a network partition) and deliver it later. One process, non-blocking
 * sockets, one stream_select() loop that sleeps until a socket or a command is ready.
 *
 * Control: one command per line on stdin, one answer line on stdout, "ok …" or "error …":
 *   (at start)  "ok <port>": the port it listens on
 *   hold      "ok <connections>": from now on, the connections open now keep what their clients
 *             send, instead of forwarding it; what the server sends still flows to the clients.
 *             Connections accepted later are forwarded as usual.
 *   cut       "ok <connections>": closes the client side of every connection open now; their
 *             server side stays open, with what it held, and what the server says on it is read
 *             and dropped.
 *   release   "ok <bytes>", once every held byte has been written to its server socket, in order
 *             (and, for the connections whose client is still there, after it the bytes that
 *             came since): holding ends on every connection. "error …" when a server closed a
 *             connection before its held bytes could be written.
 *   replay    "ok <bytes>", once the bytes of the last release are written again, each
 *             connection's on a new connection to the server (a request delivered twice); what
 *             the server answers there is read and dropped
 *   held      "ok <bytes>": how many bytes are held now, across connections
 * It exits when stdin ends (the test process is gone), and writes nothing but answers to
 * stdout; stderr (a log file) gets one line when something goes wrong.
 */

declare(strict_types=1);

/** One proxied connection: a client's socket, and the one to the server opened for it. */
final class HeldConnection
{
    /** @var resource|null null once the client is gone (closed by it, or cut) */
    public $client;

    /** @var resource|null null once the server closed it */
    public $server;

    /** What is waiting to be written to the client, and to the server. */
    public string $toClient = '';

    public string $toServer = '';

    /** What the client sent while held, not forwarded yet. */
    public string $held = '';

    public bool $holding = false;

    /** Bytes written to the server so far: where a release must get to. */
    public int $written = 0;

    /** Whether the server side stays open when the client is gone (cut, or gone while held). */
    public bool $keepServer = false;

    /** @param resource|null $client @param resource $server */
    public function __construct($client, $server)
    {
        $this->client = $client;
        $this->server = $server;
    }
}

$targetPort = (int) ($argv[1] ?? 0);
$log = static function (string $line) use ($targetPort): void {
    fwrite(STDERR, date('c') . ' holding proxy (pid ' . getmypid() . ", to port {$targetPort}): {$line}\n");
};
if ($targetPort <= 0 || $targetPort > 65535) {
    $log('usage: php holding_proxy.php <target port>');
    exit(2);
}
if (function_exists('pcntl_signal')) {
    // A write to a client that reset its connection fails with EPIPE, not a signal.
    pcntl_signal(SIGPIPE, SIG_IGN);
}

$context = stream_context_create(['socket' => ['tcp_nodelay' => true]]);
$listener = @stream_socket_server('tcp://127.0.0.1:0', $errno, $error, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $context);
if ($listener === false) {
    $log("could not listen on 127.0.0.1: {$error}");
    exit(1);
}
stream_set_blocking($listener, false);
$name = (string) stream_socket_get_name($listener, false);

$answer = static function (string $line): void {
    fwrite(STDOUT, $line . "\n");
    fflush(STDOUT);
};

/** Makes $socket non-blocking and unbuffered, so that stream_select() sees every byte. */
$unbuffered = static function ($socket): void {
    stream_set_blocking($socket, false);
    stream_set_read_buffer($socket, 0);
    stream_set_write_buffer($socket, 0);
};

/** @var array<int, HeldConnection> $connections by id */
$connections = [];
$nextId = 0;
$commands = '';
/** @var array<int, int>|null $releasing while a release is not answered: by connection id, the bytes it must have written */
$releasing = null;
$released = 0;
/** @var list<string> what the last release wrote, each connection's */
$lastReleased = [];

/** What the client of $connection sent: held, or on its way to the server. */
$fromClient = static function (HeldConnection $connection, string $bytes): void {
    if ($connection->holding) {
        $connection->held .= $bytes;
    } else {
        $connection->toServer .= $bytes;
    }
};

/** The client of $connection is gone: its server side stays if it holds something, else closes once flushed. */
$clientGone = static function (HeldConnection $connection): void {
    if ($connection->client !== null) {
        @fclose($connection->client);
        $connection->client = null;
    }
    $connection->toClient = '';
    if ($connection->holding || $connection->held !== '') {
        $connection->keepServer = true;
    }
};

/** The server closed the connection (or failed): the client gets what is left, then is closed. */
$serverGone = static function (HeldConnection $connection): void {
    if ($connection->server !== null) {
        @fclose($connection->server);
        $connection->server = null;
    }
};

/**
 * Answers the release under way once every connection it released wrote up to its mark (or
 * lost its server, and with it what it had to write).
 */
$answerRelease = static function () use (&$releasing, &$released, &$connections, $answer): void {
    // (A replay is answered the same way: its new connections, marked in $releasing.)
    if ($releasing === null) {
        return;
    }
    $lost = 0;
    foreach ($releasing as $id => $mark) {
        $connection = $connections[$id];
        if ($connection->server === null) {
            $lost += $mark - $connection->written;
        } elseif ($connection->written < $mark) {
            return;
        }
    }
    $answer($lost === 0 ? "ok {$released}" : "error {$lost} of {$released} held bytes were not written: the server closed their connection");
    $releasing = null;
};

$unbuffered(STDIN);
$answer('ok ' . substr($name, strrpos($name, ':') + 1));

try {
    while (true) {
        // Commands, one at a time; none while a release is not answered yet.
        while ($releasing === null && ($end = strpos($commands, "\n")) !== false) {
            $command = trim(substr($commands, 0, $end));
            $commands = substr($commands, $end + 1);
            if ($command === 'hold') {
                foreach ($connections as $connection) {
                    $connection->holding = true;
                }
                $answer('ok ' . count($connections));
            } elseif ($command === 'cut') {
                $cut = 0;
                foreach ($connections as $connection) {
                    if ($connection->client !== null) {
                        // What the client sent before the cut and is not read yet goes where it would have.
                        while (($chunk = @fread($connection->client, 65536)) !== false && $chunk !== '') {
                            $fromClient($connection, $chunk);
                        }
                        $clientGone($connection);
                        $connection->keepServer = true;
                        ++$cut;
                    }
                }
                $answer("ok {$cut}");
            } elseif ($command === 'release') {
                $releasing = [];
                $released = 0;
                $lastReleased = [];
                foreach ($connections as $id => $connection) {
                    $connection->holding = false;
                    if ($connection->held !== '') {
                        $released += strlen($connection->held);
                        $lastReleased[] = $connection->held;
                        $connection->toServer .= $connection->held;
                        $connection->held = '';
                        $releasing[$id] = $connection->written + strlen($connection->toServer);
                    }
                }
                $answerRelease();
            } elseif ($command === 'replay') {
                $releasing = [];
                $released = 0;
                foreach ($lastReleased as $bytes) {
                    $server = @stream_socket_client("tcp://127.0.0.1:{$targetPort}", $errno, $error, 2.0, STREAM_CLIENT_CONNECT, $context);
                    if ($server === false) {
                        $log("could not connect to replay: {$error}");
                        continue;
                    }
                    $unbuffered($server);
                    // No client: what the server answers is dropped; the server side stays open.
                    $connection = new HeldConnection(null, $server);
                    $connection->keepServer = true;
                    $connection->toServer = $bytes;
                    $connections[$nextId] = $connection;
                    $releasing[$nextId++] = strlen($bytes);
                    $released += strlen($bytes);
                }
                $answerRelease();
            } elseif ($command === 'held') {
                $answer('ok ' . array_sum(array_map(static fn (HeldConnection $c): int => strlen($c->held), $connections)));
            } else {
                $answer("error unknown command: {$command}");
            }
        }

        $read = ['stdin' => STDIN, 'listener' => $listener];
        $write = [];
        foreach ($connections as $id => $connection) {
            if ($connection->client !== null) {
                $read["c{$id}"] = $connection->client;
                if ($connection->toClient !== '') {
                    $write["c{$id}"] = $connection->client;
                }
            }
            if ($connection->server !== null) {
                $read["s{$id}"] = $connection->server;
                if ($connection->toServer !== '') {
                    $write["s{$id}"] = $connection->server;
                }
            }
        }
        $except = null;
        if (@stream_select($read, $write, $except, 1) === false) {
            // Interrupted by a signal: select again.
            continue;
        }

        foreach ($write as $key => $socket) {
            $connection = $connections[(int) substr($key, 1)];
            if ($key[0] === 's' && $connection->server !== null) {
                $sent = @fwrite($connection->server, $connection->toServer);
                if ($sent === false) {
                    $serverGone($connection);
                } else {
                    $connection->toServer = (string) substr($connection->toServer, $sent);
                    $connection->written += $sent;
                }
            } elseif ($key[0] === 'c' && $connection->client !== null) {
                $sent = @fwrite($connection->client, $connection->toClient);
                if ($sent === false) {
                    $clientGone($connection);
                } else {
                    $connection->toClient = (string) substr($connection->toClient, $sent);
                }
            }
        }

        foreach ($read as $key => $socket) {
            if ($key === 'stdin') {
                $chunk = fread(STDIN, 8192);
                if ($chunk === false || ($chunk === '' && feof(STDIN))) {
                    // The test process is gone, or let go of this one.
                    exit(0);
                } else {
                    $commands .= $chunk;
                }
                continue;
            }
            if ($key === 'listener') {
                $client = @stream_socket_accept($listener, 0);
                if ($client === false) {
                    continue;
                }
                $server = @stream_socket_client("tcp://127.0.0.1:{$targetPort}", $errno, $error, 2.0, STREAM_CLIENT_CONNECT, $context);
                if ($server === false) {
                    // The server is down: the client sees its connection closed, as it would be refused.
                    fclose($client);
                    continue;
                }
                $unbuffered($client);
                $unbuffered($server);
                $connections[$nextId++] = new HeldConnection($client, $server);
                continue;
            }
            $connection = $connections[(int) substr($key, 1)];
            if ($key[0] === 's' && $connection->server !== null) {
                $chunk = @fread($connection->server, 65536);
                if ($chunk === false || ($chunk === '' && feof($connection->server))) {
                    $serverGone($connection);
                } elseif ($connection->client !== null) {
                    $connection->toClient .= $chunk;
                }
                // Else the client is gone: what the server says is dropped.
            } elseif ($key[0] === 'c' && $connection->client !== null) {
                $chunk = @fread($connection->client, 65536);
                if ($chunk === false || ($chunk === '' && feof($connection->client))) {
                    $clientGone($connection);
                } else {
                    $fromClient($connection, $chunk);
                }
            }
        }

        $answerRelease();

        // Connections done with: the server gone and nothing left for the client (or no client),
        // the client gone and the server side neither kept nor owed anything.
        foreach ($connections as $id => $connection) {
            if ($releasing !== null && isset($releasing[$id])) {
                continue;
            }
            if ($connection->server === null && $connection->client !== null && $connection->toClient === '') {
                fclose($connection->client);
                $connection->client = null;
            }
            if ($connection->client === null && $connection->server !== null && !$connection->keepServer && $connection->toServer === '') {
                fclose($connection->server);
                $connection->server = null;
            }
            // (One that lost its server while holding stays until a release reports what was lost.)
            if ($connection->client === null && $connection->server === null && $connection->held === '') {
                unset($connections[$id]);
            }
        }
    }
} catch (\Throwable $e) {
    $log(get_class($e) . ': ' . $e->getMessage() . ' at line ' . $e->getLine());
    exit(1);
}
