//! Quality: PSNR, SSIM and VMAF of an output against its source.
//!
//! Why: a farm that splits and re-stitches must prove it did not damage the picture; the
//! optional report lets users (and our tests) check it per job.

use std::path::Path;

use ffmpeg_next as ff;

use crate::MediaError;
use tessera_model::stitch::QualityReport;

use super::frames::{Fit, FrameReader};
use super::vmaf::VmafRun;

/// Compares `output` with `source` frame by frame in presentation order: PSNR and SSIM with
/// both brought to the output's size in 8-bit 4:2:0, VMAF at the source's frame size
/// (vmaf.rs), pooled whole and per segment of `segments` (frame counts in order; empty: the
/// whole output only). Decoding and scoring use the machine's threads, as the gate does.
pub fn measure_quality(
    output: &Path,
    source: &Path,
    segments: &[u64],
) -> Result<QualityReport, MediaError> {
    crate::init();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = FrameReader::open(output, threads)?;
    let mut src = FrameReader::open(source, threads)?;
    let (w, h) = (out.decoder.width(), out.decoder.height());
    let (mut out_fit, mut src_fit) = (Fit::to(w, h), Fit::to(w, h));
    let (sw, sh) = (src.decoder.width(), src.decoder.height());
    let mut vmaf = VmafRun::new(sw, sh, (threads as u32, 1), output)?;
    let mut sse = [0f64; 3];
    let mut samples = [0f64; 3];
    let mut ssim_sum = 0.0;
    let mut frames = 0u64;
    let mut extra: i64 = 0;
    loop {
        match (out.next()?, src.next()?) {
            (Some(o), Some(s)) => {
                let a = out_fit.fit(&o, out.path())?;
                let b = src_fit.fit(&s, src.path())?;
                for p in 0..3 {
                    let (e, n) = plane_sse(&a, &b, p);
                    sse[p] += e;
                    samples[p] += n;
                }
                ssim_sum += ssim_plane(&a, &b);
                vmaf.push((&o, out.path()), (&s, src.path()))?;
                frames += 1;
            }
            (None, Some(_)) => extra += 1,
            (Some(_), None) => extra -= 1,
            (None, None) => break,
        }
    }
    if frames == 0 {
        return Err(MediaError::decode(output, "no frames to compare"));
    }
    let psnr = |e: f64, n: f64| {
        if e == 0.0 {
            100.0
        } else {
            10.0 * (255.0f64 * 255.0 / (e / n)).log10()
        }
    };
    Ok(QualityReport {
        frames,
        frame_count_difference: extra,
        psnr: psnr(sse.iter().sum(), samples.iter().sum()),
        psnr_y: psnr(sse[0], samples[0]),
        ssim: ssim_sum / frames as f64,
        vmaf: Some(vmaf.finish(segments, output)?),
    })
}

fn plane_sse(a: &ff::frame::Video, b: &ff::frame::Video, plane: usize) -> (f64, f64) {
    let (w, h) = (
        a.plane_width(plane) as usize,
        a.plane_height(plane) as usize,
    );
    let (sa, sb) = (a.stride(plane), b.stride(plane));
    let (da, db) = (a.data(plane), b.data(plane));
    let mut sum = 0u64;
    for y in 0..h {
        let ra = &da[y * sa..y * sa + w];
        let rb = &db[y * sb..y * sb + w];
        sum += ra
            .iter()
            .zip(rb)
            .map(|(&x, &y)| {
                let d = i32::from(x) - i32::from(y);
                (d * d) as u64
            })
            .sum::<u64>();
    }
    (sum as f64, (w * h) as f64)
}

/// Mean SSIM of the luma planes over 8x8 windows with a step of 4.
fn ssim_plane(a: &ff::frame::Video, b: &ff::frame::Video) -> f64 {
    let (w, h) = (a.plane_width(0) as usize, a.plane_height(0) as usize);
    ssim_luma(a.data(0), a.stride(0), b.data(0), b.stride(0), w, h)
}

/// SSIM of two 8-bit planes (exposed for tests on synthetic data).
pub fn ssim_luma(a: &[u8], sa: usize, b: &[u8], sb: usize, w: usize, h: usize) -> f64 {
    const C1: f64 = (0.01 * 255.0) * (0.01 * 255.0);
    const C2: f64 = (0.03 * 255.0) * (0.03 * 255.0);
    if w < 8 || h < 8 {
        return 1.0;
    }
    let mut total = 0.0;
    let mut count = 0u64;
    let mut y = 0;
    while y + 8 <= h {
        let mut x = 0;
        while x + 8 <= w {
            let (mut s1, mut s2, mut s11, mut s22, mut s12) = (0u32, 0u32, 0u64, 0u64, 0u64);
            for dy in 0..8 {
                let ra = &a[(y + dy) * sa + x..(y + dy) * sa + x + 8];
                let rb = &b[(y + dy) * sb + x..(y + dy) * sb + x + 8];
                for (&p, &q) in ra.iter().zip(rb) {
                    let (p, q) = (u32::from(p), u32::from(q));
                    s1 += p;
                    s2 += q;
                    s11 += u64::from(p * p);
                    s22 += u64::from(q * q);
                    s12 += u64::from(p * q);
                }
            }
            let n = 64.0;
            let (m1, m2) = (f64::from(s1) / n, f64::from(s2) / n);
            let v1 = s11 as f64 / n - m1 * m1;
            let v2 = s22 as f64 / n - m2 * m2;
            let cov = s12 as f64 / n - m1 * m2;
            total += ((2.0 * m1 * m2 + C1) * (2.0 * cov + C2))
                / ((m1 * m1 + m2 * m2 + C1) * (v1 + v2 + C2));
            count += 1;
            x += 4;
        }
        y += 4;
    }
    total / count as f64
}

#[cfg(test)]
mod tests {
    use super::ssim_luma;

    #[test]
    fn ssim_is_one_for_identical_and_lower_for_noise() {
        let w = 32;
        let a: Vec<u8> = (0..w * w).map(|i| (i * 7 % 251) as u8).collect();
        assert!((ssim_luma(&a, w, &a, w, w, w) - 1.0).abs() < 1e-12);
        let b: Vec<u8> = a
            .iter()
            .enumerate()
            .map(|(i, &v)| v.wrapping_add((i % 13) as u8 * 9))
            .collect();
        let s = ssim_luma(&a, w, &b, w, w, w);
        assert!(s < 0.9 && s > -1.0, "ssim {s}");
    }
}
