//! JSON decoded with every array's length known before its elements are read, so that each
//! `Vec` a type's `Deserialize` builds is allocated once, at its final size.
//!
//! serde_json gives sequences no size hint, so a `Vec` grows by doubling and keeps the slack:
//! a k8s-openapi Pod with three containers holds room for four 2 KB `Container`s, and every
//! such `Vec` in every cached object keeps its slack for as long as the object is cached. One
//! scan of the text first ([`ArrayLengths::scan`]) counts the elements of each array, in the
//! order of their `[`; [`exact`] wraps a deserializer of that text and gives each sequence it
//! reads the next count as its `size_hint`, which serde's `Vec` (and any well-behaved
//! collection) takes as its capacity.
//!
//! Invariants:
//! - The hints change capacities only: a text decodes to the same value, or fails with the
//!   same error, as without the wrapper (a hint is only a hint; serde caps what it trusts).
//! - Every array of the text reaches a wrapped visitor, in the order of its `[`, so the nth
//!   sequence read gets the nth count: a value a type skips (`IgnoredAny`) is walked through
//!   the wrapper instead of being skipped inside serde_json, and a `RawValue` (which
//!   serde_json captures as text without visiting it) moves the counts on by the arrays in
//!   its text.
//! - A sequence that ends at a length other than its count (a `Deserialize` that reads the
//!   text some way this module does not know) turns the hints off for the rest of the text,
//!   so a mismatch costs at most that one sequence's capacity.
//!
//! The scan and the wrapper cost time: ≈2% more to decode a k8s-openapi Pod, whose `Vec`s
//! they spare ≈10% of its heap, but ≈25–30% more for a lean Pod, whose slices are boxed at
//! their lengths anyway. So it is a choice ([`VecSizing`]) each reader makes for its type: lean types,
//! metadata-only objects and `serde_json::Value`-based ones (which ignore size hints) are
//! read with [`VecSizing::Grown`].

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// How a JSON decode sizes the `Vec`s it builds (see
/// [`KubeListerWatcher::with_sizing`](crate::KubeListerWatcher::with_sizing)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecSizing {
    /// At their lengths: each text is scanned once first for the lengths of its arrays,
    /// which serde's `Vec`s are then told as size hints.
    Exact,
    /// As serde builds them from an unknown length (doubling, the slack kept).
    Grown,
}

/// `visitor` given the sequence `de` reads (a deserializer of `text`, at its start), its
/// `Vec`s sized as `sizing` says.
pub(crate) fn deserialize_seq<'de, D: Deserializer<'de>, V: Visitor<'de>>(de: D, text: &[u8], sizing: VecSizing, visitor: V) -> Result<V::Value, D::Error> {
    match sizing {
        VecSizing::Grown => de.deserialize_seq(visitor),
        VecSizing::Exact => {
            let mut lengths = ArrayLengths::default();
            lengths.scan(text);
            exact(de, &lengths).deserialize_seq(visitor)
        }
    }
}

/// The name of the newtype through which serde_json hands out a `RawValue`'s text.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The element counts of a JSON text's arrays, in the order of their `[`, and how far a
/// decode of that text has taken them.
#[derive(Default)]
pub(crate) struct ArrayLengths {
    lengths: Vec<u32>,
    /// The open arrays and objects of a scan (kept for the next scan's use).
    open: Vec<usize>,
    next: Cell<usize>,
    off: Cell<bool>,
}

/// An open object on [`ArrayLengths::open`] (an open array is its index in `lengths`).
const OBJECT: usize = usize::MAX;

impl ArrayLengths {
    /// Counts the arrays of `text` (any JSON text; a malformed one gives counts that are
    /// only wrong, never a failure) and starts a decode over it from its first array.
    pub(crate) fn scan(&mut self, text: &[u8]) {
        self.lengths.clear();
        self.open.clear();
        self.next.set(0);
        self.off.set(false);
        outside_strings(text, |at, byte| match byte {
            b'[' => {
                let empty = text[at + 1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b']');
                self.open.push(self.lengths.len());
                self.lengths.push(u32::from(!empty));
            }
            b'{' => self.open.push(OBJECT),
            b']' | b'}' => {
                self.open.pop();
            }
            b',' => {
                if let Some(&array) = self.open.last().filter(|&&top| top != OBJECT) {
                    self.lengths[array] = self.lengths[array].saturating_add(1);
                }
            }
            _ => {}
        });
    }

    /// The count of the next array the decode meets, if hints are still on.
    fn take(&self) -> Option<usize> {
        let at = self.next.get();
        self.next.set(at + 1);
        if self.off.get() {
            return None;
        }
        let length = self.lengths.get(at).map(|&n| n as usize);
        if length.is_none() {
            self.off.set(true);
        }
        length
    }

    /// Moves past the arrays of a value the decode took as text.
    fn skip_arrays_of(&self, text: &str) {
        self.next.set(self.next.get() + arrays_in(text.as_bytes()));
    }

    /// A sequence given `hint` ended after `read` elements: a mismatch turns hints off.
    fn ended(&self, hint: Option<usize>, read: usize) {
        if hint.is_some_and(|hint| hint != read) {
            self.off.set(true);
        }
    }
}

/// The index just past the end of the string whose text starts at `from` (after its `"`).
fn string_end(text: &[u8], mut from: usize) -> usize {
    while let Some(i) = memchr::memchr2(b'"', b'\\', &text[from.min(text.len())..]) {
        let at = from + i;
        if text[at] == b'"' {
            return at + 1;
        }
        from = at + 2;
    }
    text.len()
}

/// Calls `visit` with each byte of `text` outside its strings (and its index).
#[inline(always)]
fn outside_strings(text: &[u8], mut visit: impl FnMut(usize, u8)) {
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'"' => at = string_end(text, at + 1),
            byte => {
                visit(at, byte);
                at += 1;
            }
        }
    }
}

/// How many arrays `text` (one JSON value) holds, itself included.
fn arrays_in(text: &[u8]) -> usize {
    let mut count = 0;
    outside_strings(text, |_, byte| count += usize::from(byte == b'['));
    count
}

/// `de` (a deserializer of the text `lengths` was scanned from, at its start) giving each
/// sequence its length as its size hint.
pub(crate) fn exact<'l, D>(de: D, lengths: &'l ArrayLengths) -> Exact<'l, D> {
    Exact { de, at: At { lengths, raw: false } }
}

thread_local! {
    /// The counts of the text [`with_scanned`] is reading on this thread (none outside it).
    static SCANNED: RefCell<ArrayLengths> = RefCell::new(ArrayLengths::default());
}

/// `read()`, whose [`Scanned`] values are read from `text` (in order, from its start),
/// with `text`'s counts when `sizing` is [`VecSizing::Exact`] (otherwise as their own types).
pub(crate) fn with_scanned<R>(text: &[u8], sizing: VecSizing, read: impl FnOnce() -> R) -> R {
    if sizing == VecSizing::Grown {
        return read();
    }
    /// Empties the counts when `read` returns or unwinds, so that no later read takes them.
    struct Emptied;
    impl Drop for Emptied {
        fn drop(&mut self) {
            let _ = SCANNED.try_with(|lengths| lengths.borrow_mut().scan(b""));
        }
    }
    SCANNED.with(|lengths| lengths.borrow_mut().scan(text));
    let _emptied = Emptied;
    read()
}

/// A `T` read through [`exact`] with the counts [`with_scanned`] holds, for readers that
/// take a type to deserialize rather than a deserializer (serde_json's stream
/// deserializer); outside [`with_scanned`] it reads as `T` does.
pub(crate) struct Scanned<T>(pub(crate) T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Scanned<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        SCANNED.with(|lengths| match lengths.try_borrow() {
            Ok(lengths) if !lengths.lengths.is_empty() => T::deserialize(exact(de, &lengths)).map(Scanned),
            _ => T::deserialize(de).map(Scanned),
        })
    }
}

/// What every wrapper carries: the counts, and whether the value is a `RawValue`'s text.
#[derive(Clone, Copy)]
struct At<'l> {
    lengths: &'l ArrayLengths,
    raw: bool,
}

impl<'l> At<'l> {
    fn visitor<V>(self, visitor: V) -> ExactVisitor<'l, V> {
        ExactVisitor { visitor, at: self }
    }

    fn seed<S>(self, seed: S) -> ExactSeed<'l, S> {
        ExactSeed { seed, at: self }
    }
}

/// A deserializer whose sequences know their lengths (see [`exact`]).
pub(crate) struct Exact<'l, D> {
    de: D,
    at: At<'l>,
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.de.$method($($arg,)* self.at.visitor(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Exact<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16(); deserialize_i32();
        deserialize_i64(); deserialize_i128(); deserialize_u8(); deserialize_u16(); deserialize_u32();
        deserialize_u64(); deserialize_u128(); deserialize_f32(); deserialize_f64(); deserialize_char();
        deserialize_str(); deserialize_string(); deserialize_bytes(); deserialize_byte_buf();
        deserialize_option(); deserialize_unit(); deserialize_unit_struct(name: &'static str);
        deserialize_seq(); deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize); deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        let at = At { raw: self.at.raw || name == RAW_VALUE_TOKEN, ..self.at };
        self.de.deserialize_newtype_struct(name, at.visitor(visitor))
    }

    /// Walked through the wrapper rather than skipped inside the deserializer, so that the
    /// arrays of the skipped value are counted off.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_any(self.at.visitor(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A visitor whose sequences, maps, options, newtypes and enums are read through wrappers.
struct ExactVisitor<'l, V> {
    visitor: V,
    at: At<'l>,
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: serde::de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for ExactVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visit! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char);
        visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<V::Value, E> {
        if self.at.raw {
            self.at.lengths.skip_arrays_of(v);
        }
        self.visitor.visit_str(v)
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        if self.at.raw {
            self.at.lengths.skip_arrays_of(v);
        }
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<V::Value, E> {
        if self.at.raw {
            self.at.lengths.skip_arrays_of(&v);
        }
        self.visitor.visit_string(v)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Exact { de, at: self.at })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Exact { de, at: self.at })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let hint = self.at.lengths.take();
        self.visitor.visit_seq(ExactSeq { seq, at: self.at, hint, read: 0 })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(ExactMap { map, at: self.at })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(ExactEnum { data, at: self.at })
    }
}

/// A sequence that knows its length (`hint`, when hints are on).
struct ExactSeq<'l, A> {
    seq: A,
    at: At<'l>,
    hint: Option<usize>,
    read: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for ExactSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        let element = self.seq.next_element_seed(self.at.seed(seed))?;
        match element {
            Some(_) => self.read += 1,
            None => self.at.lengths.ended(self.hint, self.read),
        }
        Ok(element)
    }

    fn size_hint(&self) -> Option<usize> {
        self.hint.map(|hint| hint.saturating_sub(self.read))
    }
}

/// A map whose keys and values are read through the wrapper.
struct ExactMap<'l, A> {
    map: A,
    at: At<'l>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for ExactMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.map.next_key_seed(self.at.seed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.map.next_value_seed(self.at.seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// An enum whose variant and content are read through the wrapper.
struct ExactEnum<'l, A> {
    data: A,
    at: At<'l>,
}

impl<'de, 'l, A: EnumAccess<'de>> EnumAccess<'de> for ExactEnum<'l, A> {
    type Error = A::Error;
    type Variant = ExactEnum<'l, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, variant) = self.data.variant_seed(self.at.seed(seed))?;
        Ok((value, ExactEnum { data: variant, at: self.at }))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for ExactEnum<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.data.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.data.newtype_variant_seed(self.at.seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.data.tuple_variant(len, self.at.visitor(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, A::Error> {
        self.data.struct_variant(fields, self.at.visitor(visitor))
    }
}

/// A seed whose deserializer is wrapped.
struct ExactSeed<'l, S> {
    seed: S,
    at: At<'l>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for ExactSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Exact { de, at: self.at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn lengths_of(text: &str) -> Vec<u32> {
        let mut lengths = ArrayLengths::default();
        lengths.scan(text.as_bytes());
        lengths.lengths
    }

    /// `T` from `text` through the wrapper, with the hints still on at the end.
    fn decode<T: serde::de::DeserializeOwned>(text: &str) -> (T, bool) {
        let mut lengths = ArrayLengths::default();
        lengths.scan(text.as_bytes());
        let mut de = serde_json::Deserializer::from_str(text);
        let value = T::deserialize(exact(&mut de, &lengths)).unwrap();
        de.end().unwrap();
        (value, !lengths.off.get())
    }

    #[test]
    fn counts_each_array_in_the_order_of_its_bracket() {
        assert_eq!(lengths_of(r#"[1, [2, 3], [], [ ], {"a": [4], "b": 5}]"#), [5, 2, 0, 0, 1]);
        assert_eq!(lengths_of(r#"{"a": "[,]", "b": ["\"[", ",\\", "x"], "c": [[[]]]}"#), [3, 1, 1, 0]);
        assert_eq!(lengths_of(r#"[{"x": 1, "y": 2}, {"z": [1,2,3]}]"#), [2, 3]);
        assert_eq!(lengths_of(r#""[1,2]""#), Vec::<u32>::new());
        // Malformed texts give counts, not failures.
        lengths_of(r#"]]}, [1, "unterminated"#);
        lengths_of(r#"["\"#);
        assert_eq!(arrays_in(br#"{"a": [1, "[", [2]], "b": {}}"#), 2);
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Inner {
        v: Vec<u64>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Outer {
        items: Vec<Inner>,
        #[serde(default)]
        tags: Option<Vec<String>>,
        raw: Option<Raw>,
        value: Option<serde_json::Value>,
        after: Vec<u8>,
        choice: Option<Choice>,
    }

    /// A `RawValue`, compared by its text.
    #[derive(Deserialize, Debug)]
    #[serde(transparent)]
    struct Raw(Box<serde_json::value::RawValue>);

    impl PartialEq for Raw {
        fn eq(&self, other: &Raw) -> bool {
            self.0.get() == other.0.get()
        }
    }

    #[derive(Deserialize, Debug, PartialEq)]
    enum Choice {
        Many(Vec<u16>),
        Pair(Vec<u8>, Vec<u8>),
        Named { list: Vec<u32> },
    }

    const TEXT: &str = r#"{"items": [{"v": [1, 2, 3]}, {"v": []}, {"v": [4, 5, 6, 7, 8]}],
        "unknown": [[1, 2], {"deep": [3, 4, 5]}],
        "tags": ["a", "b", "c"],
        "raw": {"x": [1, [2, 3]], "y": "]["},
        "value": [1, [2], {"z": []}],
        "after": [9, 9, 9],
        "choice": {"Named": {"list": [1, 2, 3, 4, 5, 6, 7]}}}"#;

    #[test]
    fn every_vec_is_allocated_at_its_length_and_decodes_as_without_the_wrapper() {
        let (outer, on): (Outer, bool) = decode(TEXT);
        assert_eq!(outer, serde_json::from_str::<Outer>(TEXT).unwrap());
        assert!(on, "the counts stayed in step with the decode");
        assert_eq!(outer.items.capacity(), 3);
        for inner in &outer.items {
            assert_eq!(inner.v.capacity(), inner.v.len());
        }
        assert_eq!(outer.tags.as_ref().unwrap().capacity(), 3);
        // After an unknown field's arrays (walked) and a RawValue's (taken as text).
        assert_eq!(outer.after.capacity(), 3);
        let Some(Choice::Named { list }) = &outer.choice else { panic!("{:?}", outer.choice) };
        assert_eq!(list.capacity(), 7);
        // Without the wrapper the same Vecs keep the slack of their growth.
        let plain: Outer = serde_json::from_str(TEXT).unwrap();
        assert!(plain.items[2].v.capacity() > 5 && plain.after.capacity() > 3);
    }

    #[test]
    fn enum_variants_with_sequences_keep_in_step() {
        let text = r#"[{"Many": [1, 2, 3]}, {"Pair": [[1], [2, 3]]}, {"Named": {"list": [5]}}]"#;
        let (choices, on): (Vec<Choice>, bool) = decode(text);
        assert_eq!(choices, serde_json::from_str::<Vec<Choice>>(text).unwrap());
        assert!(on);
        let Choice::Pair(a, b) = &choices[1] else { panic!() };
        assert_eq!((a.capacity(), b.capacity()), (1, 2));
    }

    #[test]
    fn errors_are_the_ones_serde_json_gives() {
        for text in [r#"{"items": [{"v": [1, "x"]}]}"#, r#"{"items": [{"v": [1, 2}]}"#, r#"{"items": 3}"#, "[", ""] {
            let mut lengths = ArrayLengths::default();
            lengths.scan(text.as_bytes());
            let mut de = serde_json::Deserializer::from_str(text);
            let wrapped = Outer::deserialize(exact(&mut de, &lengths)).unwrap_err();
            let plain = serde_json::from_str::<Outer>(text).unwrap_err();
            assert_eq!(wrapped.to_string(), plain.to_string(), "{text}");
        }
    }

    #[test]
    fn counts_out_of_step_turn_the_hints_off_and_change_nothing_else() {
        // Counts scanned from another text: the first sequence's count is wrong.
        let mut lengths = ArrayLengths::default();
        lengths.scan(b"[[1, 2, 3, 4, 5, 6, 7, 8, 9], [1]]");
        let text = "[[1, 2], [3, 4, 5], [6]]";
        let mut de = serde_json::Deserializer::from_str(text);
        let value = Vec::<Vec<u8>>::deserialize(exact(&mut de, &lengths)).unwrap();
        assert_eq!(value, [vec![1, 2], vec![3, 4, 5], vec![6]]);
        assert!(lengths.off.get());
        // The sequences after the mismatch get no hint (the second would have got 1).
        assert!(value[2].capacity() >= 1 && value[1].capacity() >= 3);
    }

    #[test]
    fn a_stream_of_scanned_values_keeps_in_step() {
        let text = "{\"v\": [1, 2, 3]}\n{\"v\": []}\n\n{\"v\": [4, 5, 6, 7, 8]}\n";
        let values: Vec<Inner> = with_scanned(text.as_bytes(), VecSizing::Exact, || {
            serde_json::Deserializer::from_str(text).into_iter::<Scanned<Inner>>().map(|v| v.unwrap().0).collect()
        });
        assert_eq!(values.iter().map(|v| (v.v.len(), v.v.capacity())).collect::<Vec<_>>(), [(3, 3), (0, 0), (5, 5)]);
        // Outside `with_scanned`, or within it for `VecSizing::Grown`, no hints: a `Vec` keeps
        // the slack of its growth.
        let text = r#"{"v": [4, 5, 6, 7, 8]}"#;
        let alone: Scanned<Inner> = serde_json::from_str(text).unwrap();
        assert!(alone.0.v.capacity() > 5);
        let grown: Scanned<Inner> = with_scanned(text.as_bytes(), VecSizing::Grown, || serde_json::from_str(text).unwrap());
        assert!(grown.0.v.capacity() > 5);
    }

    /// A k8s-openapi Pod decoded through the wrapper keeps no slack in its `Vec`s, and
    /// its decode makes fewer allocations (no `Vec` grows).
    #[test]
    fn a_pod_keeps_no_slack() {
        use k8s_openapi::api::core::v1::Pod;
        let containers: Vec<String> = (0..3)
            .map(|i| format!(r#"{{"name": "c{i}", "image": "img", "args": ["a", "b", "c"], "ports": [{{"containerPort": 80}}, {{"containerPort": 81}}, {{"containerPort": 82}}], "env": [{{"name": "A", "value": "1"}}, {{"name": "B", "value": "2"}}, {{"name": "C", "value": "3"}}, {{"name": "D", "value": "4"}}, {{"name": "E", "value": "5"}}]}}"#))
            .collect();
        let text = format!(
            r#"{{"metadata": {{"name": "p", "namespace": "n", "managedFields": [{{"manager": "m", "fieldsV1": {{"f:spec": {{"f:containers": {{}}}}}}}}]}},
               "spec": {{"containers": [{}], "volumes": [{{"name": "a", "emptyDir": {{}}}}, {{"name": "b", "emptyDir": {{}}}}, {{"name": "c", "emptyDir": {{}}}}]}},
               "status": {{"conditions": [{{"type": "Ready", "status": "True"}}, {{"type": "X", "status": "True"}}, {{"type": "Y", "status": "True"}}]}}}}"#,
            containers.join(",")
        );
        let ((pod, on), wrapped) = crate::alloc_count::allocations_of(|| decode::<Pod>(&text));
        assert!(on);
        let (plain, unwrapped) = crate::alloc_count::allocations_of(|| serde_json::from_str::<Pod>(&text).unwrap());
        assert_eq!(pod, plain);
        let slack = |pod: &Pod| {
            let spec = pod.spec.as_ref().unwrap();
            let containers = &spec.containers;
            (containers.capacity() - containers.len())
                + (spec.volumes.as_ref().unwrap().capacity() - 3)
                + (pod.status.as_ref().unwrap().conditions.as_ref().unwrap().capacity() - 3)
                + containers.iter().map(|c| c.env.as_ref().unwrap().capacity() - 5 + c.ports.as_ref().unwrap().capacity() - 3).sum::<usize>()
        };
        assert_eq!(slack(&pod), 0);
        assert!(slack(&plain) > 0, "serde_json alone leaves slack");
        // The wrapped decode's count includes the scan's two Vecs.
        assert!(wrapped < unwrapped, "{wrapped} allocations through the wrapper, {unwrapped} without");
    }
}
