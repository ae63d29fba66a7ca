//! A stand-in media child that tries what an exploited decoder would: read its parent's
//! environment, connect to a listener on 127.0.0.1, write outside its work directory, read a
//! file it was not given.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A bash stand-in child (bash for its `/dev/tcp`) that reports, as `yes`/`no` words, whether
/// it could read `/proc/$PPID/environ`, connect to 127.0.0.1:`port`, write `outside`, write
/// `inside`, read `token` (a file outside what it may read, like a pod's token files).
fn intruder(dir: &Path, port: u16, outside: &Path, inside: &Path, token: &Path) -> Sandbox {
    let path = dir.join("intruder.sh");
    let body = format!(
        r#"#!/bin/bash
cat >/dev/null
try() {{ if ( eval "$1" ) 2>/dev/null; then printf yes; else printf no; fi; }}
environ=$(try 'head -c 64 /proc/$PPID/environ | grep -q .')
tcp=$(try 'exec 3<>/dev/tcp/127.0.0.1/{port}')
outside=$(try 'echo x > {outside}')
inside=$(try 'echo x > {inside}')
token=$(try 'grep -q secret {token}')
echo "result {{\"ok\":\"$environ $tcp $outside $inside $token\",\"error\":null,\"peak_rss_bytes\":0}}"
"#,
        outside = outside.display(),
        inside = inside.display(),
        token = token.display(),
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox::new(path)
}

#[tokio::test]
async fn a_child_cannot_read_the_parents_environment_reach_the_network_or_write_outside() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let (outside, inside) = (dir.path().join("outside.txt"), work.join("inside.txt"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let secrets = tempfile::tempdir().unwrap();
    let token = secrets.path().join("token");
    std::fs::write(&token, "secret").unwrap();
    let sb = intruder(dir.path(), port, &outside, &inside, &token)
        .confined(Confinement::default().writing(&work));
    let (seen, _): (String, _) = sb
        .run(&tests::probe_op(), tests::limits(20), &mut |_| {})
        .await
        .unwrap();
    let seen: Vec<&str> = seen.split_whitespace().collect();
    let support = confinement_support();
    println!("{}: {seen:?}", confinement_report(support, true));
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(seen[0], "no", "the child read its parent's environment");
    assert_eq!(seen[1], "no", "the child connected to 127.0.0.1:{port}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    assert_eq!(
        seen[3], "yes",
        "the child could not write in its work directory"
    );
    assert!(inside.exists());
    if support.landlock.is_some() {
        assert_eq!(seen[2], "no", "the child wrote outside its work directory");
        assert!(!outside.exists());
        assert_eq!(
            seen[4], "no",
            "the child read a file outside what it may read"
        );
    } else {
        println!("no Landlock on this kernel: writes outside are guarded by the uid only");
    }
}

/// The seccomp filter is well formed: every jump lands inside the program, which ends with
/// its two returns.
#[test]
fn the_socket_filter_jumps_stay_inside_the_program() {
    let prog = confine::seccomp_program_for_tests();
    let len = prog.len();
    for (i, ins) in prog.iter().enumerate() {
        assert!(i + 1 + usize::from(ins.jt) < len + 1 && i + 1 + usize::from(ins.jf) <= len);
    }
    assert_eq!(prog[len - 2].k, libc::SECCOMP_RET_ALLOW);
    assert_eq!(
        prog[len - 1].k,
        libc::SECCOMP_RET_ERRNO | libc::EACCES as u32
    );
}

/// A confined warm child cannot write its own `/proc/self/clear_refs`, so its parent resets
/// its peak memory figure before each request: the second operation of a child whose first
/// one peaked at 200 MiB reports its own, small peak.
#[tokio::test]
async fn a_confined_warm_childs_peak_memory_is_per_operation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.py");
    let body = r#"#!/usr/bin/env python3
import re, sys
first = True
for line in sys.stdin:
    seq = re.search(r'"seq":(\d+)', line).group(1)
    if first:
        x = b"x" * (200 << 20)
        del x
        first = False
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
    print('result {"ok":1,"error":null,"peak_rss_bytes":%d,"seq":%s}' % (int(hwm) * 1024, seq), flush=True)
"#;
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut slot = SandboxSlot::new(Sandbox::new(path), WarmPolicy::default());
    let (op, limits) = (tests::probe_op(), tests::limits(20));
    let (_, first) = slot.run::<u32>(&op, limits, &mut |_| {}).await.unwrap();
    let (_, second) = slot.run::<u32>(&op, limits, &mut |_| {}).await.unwrap();
    assert!(first.peak_rss_bytes > 150 << 20, "{first:?}");
    assert!(second.peak_rss_bytes < 100 << 20, "{second:?}");
}
