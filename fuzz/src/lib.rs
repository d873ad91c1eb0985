//! Helpers shared by the fuzz targets.

/// Builds the input: raw bytes, or (when the first byte says so) a valid
/// template with the rest of the input applied as (offset, value) overwrites
/// and an optional cut, so the fuzzer starts deep inside the parser.
pub fn template_input(data: &[u8], templates: &[Vec<u8>]) -> Vec<u8> {
    let Some((&sel, rest)) = data.split_first() else { return Vec::new() };
    let pick = usize::from(sel) % (templates.len() + 1);
    if pick == templates.len() {
        return rest.to_vec();
    }
    let mut b = templates[pick].clone();
    let mut it = rest.chunks_exact(2);
    for c in &mut it {
        let at = usize::from(c[0]) * b.len() / 256;
        b[at] = c[1];
    }
    if let [cut] = it.remainder() {
        b.truncate(usize::from(*cut) * b.len() / 255);
    }
    b
}
