//! The example network's kernels: plain f32 loops on slices, shared by the
//! arena-backed executor and the `Vec`-based reference, so both compute the
//! same bits.

/// Lays out the 3×3 neighbourhoods of `x` (`c` channels, `h`×`w`, zero
/// padding 1) as a `(c·9) × (h·w)` matrix in `cols`.
pub fn im2col3x3(x: &[f32], c: usize, h: usize, w: usize, cols: &mut [f32]) {
    let hw = h * w;
    for ci in 0..c {
        for ky in 0..3 {
            for kx in 0..3 {
                let row = &mut cols[((ci * 9) + ky * 3 + kx) * hw..][..hw];
                for y in 0..h {
                    let sy = y as isize + ky as isize - 1;
                    for xx in 0..w {
                        let sx = xx as isize + kx as isize - 1;
                        row[y * w + xx] =
                            if sy < 0 || sy >= h as isize || sx < 0 || sx >= w as isize {
                                0.0
                            } else {
                                x[ci * hw + sy as usize * w + sx as usize]
                            };
                    }
                }
            }
        }
    }
}

/// `out[m×n] = a[m×k] · b[k×n]`.
pub fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, out: &mut [f32]) {
    for i in 0..m {
        let row = &mut out[i * n..][..n];
        row.fill(0.0);
        for p in 0..k {
            let av = a[i * k + p];
            let brow = &b[p * n..][..n];
            for j in 0..n {
                row[j] += av * brow[j];
            }
        }
    }
}

/// A 3×3 convolution, stride 1, padding 1: `c_in` → `c_out` channels on an
/// `h`×`w` image, through an im2col workspace of `c_in·9·h·w` floats.
#[allow(clippy::too_many_arguments)]
pub fn conv3x3(
    x: &[f32],
    c_in: usize,
    h: usize,
    w: usize,
    weight: &[f32],
    bias: &[f32],
    c_out: usize,
    out: &mut [f32],
    workspace: &mut [f32],
) {
    im2col3x3(x, c_in, h, w, workspace);
    matmul(weight, workspace, c_out, c_in * 9, h * w, out);
    for (co, b) in bias.iter().enumerate().take(c_out) {
        for v in &mut out[co * h * w..][..h * w] {
            *v += b;
        }
    }
}

/// `out = max(x, 0)`.
pub fn relu(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v.max(0.0);
    }
}

/// `out = a + b`.
pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

/// The mixed-output head: per-channel means (`features`, `c` floats) and a
/// 2×2 average pool (`pooled`, `c·(h/2)·(w/2)`), summing rows in a
/// workspace of `w` floats.
pub fn head(
    x: &[f32],
    c: usize,
    h: usize,
    w: usize,
    features: &mut [f32],
    pooled: &mut [f32],
    row_ws: &mut [f32],
) {
    let (ph, pw) = (h / 2, w / 2);
    for ci in 0..c {
        let plane = &x[ci * h * w..][..h * w];
        features[ci] = plane.iter().sum::<f32>() / (h * w) as f32;
        for y in 0..ph {
            for (xx, r) in row_ws.iter_mut().enumerate().take(w) {
                *r = plane[2 * y * w + xx] + plane[(2 * y + 1) * w + xx];
            }
            for xx in 0..pw {
                pooled[ci * ph * pw + y * pw + xx] = (row_ws[2 * xx] + row_ws[2 * xx + 1]) * 0.25;
            }
        }
    }
}
