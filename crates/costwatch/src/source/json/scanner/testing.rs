//! What the tests of the one-pass readers share: pages generated in and
//! out of the plain shape, corrupted byte by byte, and a tally of what the
//! reader and serde made of each.

/// xorshift64*: deterministic, so a failure names a reproducible page.
pub(in crate::source) struct Rng(pub(in crate::source) u64);

impl Rng {
    pub(in crate::source) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(in crate::source) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(in crate::source) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub(in crate::source) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Text being built, and whether it is still in the plain shape.
pub(in crate::source) struct Gen {
    pub(in crate::source) rng: Rng,
    pub(in crate::source) plain: bool,
}

/// Values of each kind: plain ones the reader reads, then the rest.
pub(in crate::source) struct Pool {
    pub(in crate::source) plain: &'static [&'static str],
    pub(in crate::source) other: &'static [&'static str],
}
/// Values of unknown fields: the reader skips the plain ones.
pub(in crate::source) const ANY: Pool = Pool {
    plain: &[
        "null",
        "true",
        "false",
        "0",
        "-1.5e-7",
        "\"x\"",
        "[]",
        "{}",
        "[1,[2,[3]],{\"a\":null}]",
        "{\"x\":{\"y\":[true,false,\"z\"]}}",
    ],
    other: &[
        "\"esc\\\"aped\"",
        "[1,]",
        "{\"a\"}",
        "nul",
        "tru",
        "01",
        "1.e5",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ],
};

impl Gen {
    /// A page's text, rarely with something after its end (no longer
    /// plain).
    pub(in crate::source) fn end_page(&mut self, mut out: String) -> String {
        if self.rng.chance(2) {
            self.plain = false;
            out.push_str(self.rng.pick(&["x", "{}", ",", "]"]));
        }
        out
    }

    pub(in crate::source) fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng(seed | 1),
            plain: true,
        }
    }
    /// Whitespace JSON allows between tokens.
    pub(in crate::source) fn ws(&mut self) -> &'static str {
        if self.rng.chance(85) {
            ""
        } else {
            self.rng.pick(&[" ", "\n", "\t", " \r\n  "])
        }
    }
    /// A value from `pool`, rarely one outside the plain shape.
    pub(in crate::source) fn value(&mut self, pool: &Pool, odd_percent: u64) -> String {
        if self.rng.chance(odd_percent) {
            self.plain = false;
            self.rng.pick(pool.other).to_owned()
        } else {
            self.rng.pick(pool.plain).to_owned()
        }
    }
    /// An object of `fields`, shuffled, perhaps with an unknown field (in
    /// a struct, not in a map such as `by_model`).
    pub(in crate::source) fn object(
        &mut self,
        mut fields: Vec<(String, String)>,
        is_struct: bool,
    ) -> String {
        for i in (1..fields.len()).rev() {
            fields.swap(i, self.rng.below(i + 1));
        }
        if is_struct && self.rng.chance(10) {
            let v = self.value(&ANY, 15);
            let at = self.rng.below(fields.len() + 1);
            fields.insert(at, ("surprise".to_owned(), v));
        }
        let mut out = format!("{}{{", self.ws());
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let (a, b, c) = (self.ws(), self.ws(), self.ws());
            out.push_str(&format!("{a}\"{k}\"{b}:{c}{v}"));
        }
        out.push_str(self.ws());
        out.push('}');
        out
    }
    /// The fields of a row: each required one present, or rarely missing
    /// (no longer plain), each optional one perhaps, rarely one twice.
    pub(in crate::source) fn fields(
        &mut self,
        spec: &[(&str, &Pool, bool)],
    ) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        for (key, pool, required) in spec {
            let present = if *required {
                let keep = !self.rng.chance(1);
                self.plain &= keep;
                keep
            } else {
                self.rng.chance(70)
            };
            if present {
                let v = self.value(pool, 1);
                fields.push(((*key).to_owned(), v));
            }
        }
        if !fields.is_empty() && self.rng.chance(1) {
            self.plain = false;
            let again = fields[self.rng.below(fields.len())].clone();
            fields.push(again);
        }
        fields
    }
}

/// What happened to the texts a test handed to a reader and to serde.
#[derive(Default)]
pub(in crate::source) struct Tally {
    pub(in crate::source) read: usize,
    pub(in crate::source) stepped_aside: usize,
    pub(in crate::source) refused: usize,
}

impl Tally {
    /// Asserts that each outcome came at least as often as given, so that
    /// the generator is seen to reach it.
    pub(in crate::source) fn assert_at_least(
        &self,
        read: usize,
        stepped_aside: usize,
        refused: usize,
    ) {
        assert!(self.read >= read, "read {}", self.read);
        assert!(
            self.stepped_aside >= stepped_aside,
            "stepped aside {}",
            self.stepped_aside
        );
        assert!(self.refused >= refused, "refused {}", self.refused);
    }

    /// Checks what the reader (`fast`) and serde (`slow`) made of `text`,
    /// each as its `Debug` text: whenever the reader reads it, serde reads
    /// the same; `plain` says the reader must read it.
    pub(in crate::source) fn agree(
        &mut self,
        text: &str,
        plain: bool,
        fast: Option<String>,
        slow: Result<String, String>,
    ) {
        match (&fast, &slow) {
            (Some(f), Ok(s)) => {
                assert_eq!(f, s, "the two readers differ on {text}");
                self.read += 1;
            }
            (Some(_), Err(e)) => panic!("the reader read a page serde refuses ({e}): {text}"),
            (None, Ok(_)) => self.stepped_aside += 1,
            (None, Err(_)) => self.refused += 1,
        }
        if plain {
            assert!(fast.is_some(), "a plain page was not read: {text}");
        }
    }
}

/// `count` pages from `page`, each handed to `check` (which tallies it)
/// with whether it was generated in the plain shape.
pub(in crate::source) fn generated(
    count: u64,
    mut page: impl FnMut(&mut Gen) -> String,
    mut check: impl FnMut(&str, bool, &mut Tally),
) -> Tally {
    let mut tally = Tally::default();
    for seed in 1..=count {
        let mut g = Gen::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let text = page(&mut g);
        check(&text, g.plain, &mut tally);
    }
    tally
}

/// Plain pages from `page` with one byte deleted, inserted, replaced, or
/// the text cut, each handed to `check` (which tallies it), until 20,000
/// are tallied.
pub(in crate::source) fn corrupted(
    mut page: impl FnMut(&mut Gen) -> String,
    mut check: impl FnMut(&str, &mut Tally),
) -> Tally {
    const BYTES: &[u8] = b"{}[]\":,0123456789.-+eEnulltrfas \\\n";
    let mut tally = Tally::default();
    let mut rng = Rng(0x5EED);
    let mut seed = 0u64;
    while tally.read + tally.stepped_aside + tally.refused < 20_000 {
        seed += 1;
        let mut g = Gen::new(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let text = page(&mut g);
        if !g.plain || !text.is_ascii() {
            continue;
        }
        for _ in 0..10 {
            let mut b = text.clone().into_bytes();
            let at = rng.below(b.len());
            let byte = BYTES[rng.below(BYTES.len())];
            match rng.below(4) {
                0 => {
                    b.remove(at);
                }
                1 => b.insert(at, byte),
                2 => b[at] = byte,
                _ => b.truncate(at),
            }
            let Ok(bad) = String::from_utf8(b) else {
                continue;
            };
            check(&bad, &mut tally);
        }
    }
    tally
}
