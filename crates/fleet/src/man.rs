//! The man page, ganesha-shm-fleet(8), in roff: written from the settings table that `--help`
//! is written from (`config::SETTINGS`), so that the two cannot disagree. The Debian package
//! installs what `ganesha-shm-fleet --man` prints.

use crate::config::{flag_of, DESCRIPTION, SETTINGS};

/// The man page.
pub fn page() -> String {
    let mut page = format!(
        ".TH GANESHA-SHM-FLEET 8 \"\" \"ganesha-shm-fleet {}\" \"System Administration\"\n\
         .SH NAME\n\
         ganesha-shm-fleet \\- share a host's Ganesha circuit counts with its fleet through Redis\n\
         .SH SYNOPSIS\n\
         .B ganesha-shm-fleet\n\
         [\\fB\\-\\-config\\fR \\fIFILE\\fR] \\fB\\-\\-segment\\fR \\fIPATH\\fR \\fB\\-\\-redis\\fR \\fIURL\\fR \
         \\fB\\-\\-fleet\\fR \\fINAME\\fR [\\fIFLAGS\\fR]\n\
         .br\n\
         .B ganesha-shm-fleet\n\
         \\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR | \\fB\\-\\-man\\fR\n\
         .SH DESCRIPTION\n{}\n\
         .PP\n\
         Requests never wait on it: PHP reads what the last sync wrote, and each host decides alone \
         once that is two intervals old (Redis down, hung or unreachable, the sidecar stopped).\n\
         .SH OPTIONS\n\
         Every option is also a setting of the config file, named without its dashes and with _ \
         for \\-; a flag overrides the file.\n",
        env!("CARGO_PKG_VERSION"),
        escape(DESCRIPTION)
    );
    for setting in SETTINGS {
        page.push_str(&format!(".TP\n.B {}\n{}", escape(&flag_of(setting)), escape(setting.help)));
        match setting.default {
            "" => page.push('\n'),
            "required" => page.push_str(" Required.\n"),
            default => page.push_str(&format!(" Default: {}.\n", escape(default))),
        }
    }
    page.push_str(concat!(
        ".TP\n.B \\-\\-help\nPrint the options and exit.\n",
        ".TP\n.B \\-\\-version\nPrint the version and exit.\n",
        ".TP\n.B \\-\\-man\nPrint this page, in roff, and exit.\n",
        ".SH REDIS\n",
        "Fleet mode runs one Lua script (EVALSHA) and a few commands on keys prefixed with ",
        "ganesha\\-shm:3:{\\fIFLEET\\fR. An ACL user needs only these rights (docs/fleet.md, \"ACL users\"):\n",
        ".PP\n.nf\n",
        "ACL SETUSER fleet-shop on >PASSWORD resetkeys ~ganesha\\-shm:3:{shop}* ~ganesha\\-shm:3:{shop:*\n",
        "  resetchannels \\-@all +script|load +evalsha +time +set +expire +hget +hmget +hset +hdel\n",
        "  +zadd +zcount +zremrangebyscore +info +role +ping\n",
        ".fi\n",
        ".PP\n",
        "A command the user may not run is logged with Redis's NOPERM message, which names it. ",
        "At each connection it reads Redis's maxmemory and maxmemory\\-policy (INFO memory) and ",
        "logs once where Redis may evict the fleet's keys; a shard Redis lost (evicted, flushed, ",
        "a failover) is published again by every host at its next sync (docs/fleet.md, ",
        "\"Redis's memory\"). ",
        "With TLS, a certificate that does not verify is an error, logged on one line; it never ",
        "falls back to plain TCP.\n",
        ".SH SIGNALS\n",
        ".TP\n.B SIGTERM, SIGINT\n",
        "Stop after the sync under way, clearing the fleet's view first, so that the hosts decide ",
        "alone at once; exit status 0.\n",
        ".SH EXIT STATUS\n",
        ".TP\n.B 0\nStopped by SIGTERM or SIGINT, or after \\-\\-syncs.\n",
        ".TP\n.B 1\nThe segment file was made without fleet mode (ganesha_shm.fleet=1).\n",
        ".TP\n.B 2\nA setting is wrong: the line on stderr says which and why.\n",
        ".PP\n",
        "Redis being down, unreachable, or refusing a TLS handshake or a command is not an exit: ",
        "it is logged once, and retried from 100 ms, doubling up to one interval.\n",
        ".SH LOGGING\n",
        "One line per event on stderr, with the UTC time and the pid. What anyone who can write ",
        "Redis can cause is logged at most 10 lines a minute.\n",
        ".SH FILES\n",
        ".TP\n.I /etc/ganesha\\-shm/fleet.conf\n",
        "The config file of the packaged service.\n",
        ".TP\n.I /usr/lib/systemd/system/ganesha\\-shm\\-fleet.service\n",
        "The systemd unit, installed disabled.\n",
        ".TP\n.I /run/ganesha\\-shm/\n",
        "Where ganesha_shm.path usually puts the segment file.\n",
        ".SH SEE ALSO\n",
        ".BR redis\\-server (1),\n",
        ".BR redis\\-sentinel (1),\n",
        ".BR php\\-fpm8.2 (8);\n",
        "/usr/share/doc/ganesha\\-shm\\-fleet/docs/fleet.md.gz\n",
    ));
    page
}

/// `text` for roff: backslashes doubled, dashes escaped, and a line that would start with a
/// control character (. or ') kept as text.
fn escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .split('\n')
        .map(|line| if line.starts_with(['.', '\'']) { format!("\\&{line}") } else { line.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_of_the_help_is_in_the_man_page() {
        let page = page();
        let help = crate::config::usage();
        for setting in SETTINGS {
            let flag = flag_of(setting);
            assert!(help.contains(&flag), "--help lacks {flag}");
            assert!(page.contains(&escape(&flag)), "the man page lacks {flag}");
        }
        assert!(page.starts_with(".TH GANESHA-SHM-FLEET 8"));
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS", "EXIT STATUS", "FILES"] {
            assert!(page.contains(&format!(".SH {section}\n")), "no {section} section");
        }
    }

    #[test]
    fn roff_control_characters_stay_text() {
        assert_eq!(escape("a-b \\ c"), "a\\-b \\e c");
        assert_eq!(escape(".starts"), "\\&.starts");
    }
}
