//! The machine's floor for the flow table's memory traffic, over a buffer of
//! `MB` MiB (huge pages requested, as for the flow table), in bursts of
//! `BATCH` (default 32) accesses. Prints thread CPU time per access.
//!
//! `PATTERN` (default `one`) picks what one access (one packet) touches:
//! * `one`: one random line, prefetched for the whole burst, then read and
//!   written (read-modify-write).
//! * `far`: a random *tag* line, read `LAG` accesses (default 8) after its
//!   prefetch; a byte of it picks a random line of the buffer (the entry),
//!   which is prefetched, then read and written after the burst. Today's
//!   table layout: the tags live in their own array (one byte per 48-byte
//!   entry, so 1/48 of the buffer's size), and the entry is a second miss.
//! * `near`: the same, but the entry lies in the 256 bytes after the tag line
//!   (same page, same DRAM row): a layout that keeps a window's tags next to
//!   its entries.
//!
//! A regular packet touches ≈ 1.5 entry lines plus a tag line, so the
//! `far` figure at the table's size bounds its time from below, whatever
//! the stage's code does (BENCHMARKS.md, FlowPolice).
//!
//! `cargo run --release -p flowpolice --example memfloor -- 64 512 6144`
//! `PATTERN=near cargo run --release -p flowpolice --example memfloor -- 6144`

use std::hint::black_box;

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    One,
    Far,
    Near,
}

fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() {
    let batch = env("BATCH", 32).clamp(1, 256);
    let lag = env("LAG", 8).clamp(1, batch);
    let pattern = match std::env::var("PATTERN").as_deref() {
        Ok("far") => Pattern::Far,
        Ok("near") => Pattern::Near,
        Ok("one") | Err(_) => Pattern::One,
        Ok(p) => panic!("PATTERN: one | far | near, not {p}"),
    };
    for mb in std::env::args().skip(1).filter_map(|a| a.parse::<usize>().ok()) {
        let lines = ((mb << 20) / 64).max(8);
        let mut buf = memhint::huge_filled_vec(lines, Line([1; 64]));
        // `far`: the tag array, one byte per 48-byte entry.
        let tag_lines = if pattern == Pattern::Far { lines * 64 / 48 / 64 } else { 0 };
        let tags = memhint::huge_filled_vec(tag_lines.max(8), Line([1; 64]));
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut tag = [0usize; 256];
        let mut idx = [0usize; 256];
        let accesses = 4_000_000 / batch * batch;
        // The entry a tag byte leads to: data-dependent on the tag line.
        let entry = |buf: &[Line], t: usize, r: u64| -> usize {
            match pattern {
                Pattern::Near => {
                    let b = usize::from(buf[t].0[(r & 63) as usize]);
                    (t & !3) + 1 + (b + r as usize) % 3
                }
                _ => (r as usize ^ usize::from(tags[t].0[(r & 63) as usize])) % buf.len(),
            }
        };
        let t0 = thread_cpu_ns();
        for _ in 0..accesses / batch {
            for k in 0..batch {
                let r = xorshift(&mut s);
                if pattern == Pattern::One {
                    idx[k] = (r % buf.len() as u64) as usize;
                    memhint::prefetch(&buf[idx[k]]);
                    continue;
                }
                if pattern == Pattern::Near {
                    // Tag lines start 256-byte blocks; the entries follow.
                    tag[k] = (r % (buf.len() as u64 / 4)) as usize * 4;
                    memhint::prefetch(&buf[tag[k]]);
                } else {
                    tag[k] = (r % tags.len() as u64) as usize;
                    memhint::prefetch(&tags[tag[k]]);
                }
                if k >= lag {
                    let j = k - lag;
                    idx[j] = entry(&buf, tag[j], xorshift(&mut s));
                    memhint::prefetch(&buf[idx[j]]);
                }
            }
            if pattern != Pattern::One {
                for j in batch.saturating_sub(lag)..batch {
                    idx[j] = entry(&buf, tag[j], xorshift(&mut s));
                    memhint::prefetch(&buf[idx[j]]);
                }
            }
            for &i in idx.iter().take(batch) {
                buf[i].0[0] = buf[i].0[0].wrapping_add(1);
            }
        }
        let ns = (thread_cpu_ns() - t0) / accesses as f64;
        black_box(&buf);
        let what = match pattern {
            Pattern::One => "one random line (read + write)".to_string(),
            Pattern::Far => format!("tag line, then a random entry line (lag {lag})"),
            Pattern::Near => format!("tag line, then an entry line next to it (lag {lag})"),
        };
        println!("{mb} MiB, batch {batch}: {ns:.1} ns per access: {what}");
    }
}
