//! Shakespeare-like data the text tests write: a complete-works text in Project Gutenberg's
//! layout and LEAF's JSON folders of the same speeches.

use std::path::Path;

/// Characters of each play: (name, the syllables their words are made of).
pub const CAST: [(&str, &str); 6] = [
    ("HAMLET", "ab"),
    ("OPHELIA", "eo"),
    ("KING", "ri"),
    ("QUEEN", "ue"),
    ("FOOL", "ol"),
    ("GHOST", "sh"),
];

/// The `k`-th line of `who`: words of two to four of its letters, a capital and a stop.
pub fn line(who: usize, k: usize) -> String {
    let letters: Vec<char> = CAST[who].1.chars().collect();
    let words: Vec<String> = (0..4 + k % 3)
        .map(|w| {
            (0..2 + (k + w) % 3)
                .map(|j| letters[(k * 7 + w * 3 + j) % letters.len()])
                .collect()
        })
        .collect();
    let mut s = words.join(" ");
    s[..1].make_ascii_uppercase();
    s.push(if k.is_multiple_of(2) { '.' } else { ',' });
    s
}

/// A complete-works text in Project Gutenberg's layout: a header, two plays of the cast
/// (three characters each) with speeches over several lines, page-break notices, and the
/// end marker; CRLF line ends. Returns it with each character's lines in order.
pub fn complete_works(lines_each: usize) -> (String, Vec<(String, Vec<String>)>) {
    let mut text = vec![
        "The Complete Works of William Shakespeare".to_string(),
        String::new(),
        "by William Shakespeare".to_string(),
        String::new(),
    ];
    let mut spoken = Vec::new();
    for (play, title) in ["THE TRAGEDY OF ONE", "THE TRAGEDY OF TWO"]
        .iter()
        .enumerate()
    {
        text.extend([String::new(), title.to_string(), String::new()]);
        text.push("by William Shakespeare".to_string());
        text.push(String::new());
        let cast: Vec<usize> = (0..3).map(|c| play * 3 + c).collect();
        let mut said: Vec<Vec<String>> = vec![Vec::new(); 3];
        let mut k = 0;
        while said.iter().any(|s| s.len() < lines_each) {
            let c = k % 3;
            let who = cast[c];
            let speech: Vec<String> = (0..2).map(|j| line(who, k * 2 + j)).collect();
            text.push(format!("  {}. {}", CAST[who].0, speech[0]));
            if k % 5 == 4 {
                // A page break inside the speech.
                text.extend([
                    String::new(),
                    "<<THIS ELECTRONIC VERSION IS COPYRIGHT>>".to_string(),
                    String::new(),
                ]);
            }
            text.push(format!("    {}", speech[1]));
            text.push(String::new());
            said[c].extend(speech);
            k += 1;
        }
        for (c, lines) in said.into_iter().enumerate() {
            spoken.push((
                format!("{}_{}", title.replace(' ', "_"), CAST[cast[c]].0),
                lines,
            ));
        }
    }
    text.push("End of the Project Gutenberg EBook".to_string());
    (text.join("\r\n") + "\r\n", spoken)
}

/// LEAF's train/ and test/ folders from the same speeches: each character's text (lines
/// joined by spaces) cut into windows of `seq` symbols at stride 1, the first 80 % of its
/// lines' windows in train/, the rest in test/.
pub fn leaf(dir: &Path, spoken: &[(String, Vec<String>)], seq: usize) {
    let mut files = [
        serde_json::json!({"users": [], "num_samples": [], "user_data": {}}),
        serde_json::json!({"users": [], "num_samples": [], "user_data": {}}),
    ];
    for (name, lines) in spoken {
        let cut = lines.len() * 4 / 5;
        for (part, lines) in [&lines[..cut], &lines[cut..]].into_iter().enumerate() {
            let text: Vec<char> = lines.join(" ").chars().collect();
            let (x, y): (Vec<String>, Vec<String>) = (0..text.len() - seq)
                .map(|i| (text[i..i + seq].iter().collect(), text[i + seq].to_string()))
                .unzip();
            let f = &mut files[part];
            f["users"].as_array_mut().unwrap().push(name.clone().into());
            f["num_samples"]
                .as_array_mut()
                .unwrap()
                .push(x.len().into());
            f["user_data"][name] = serde_json::json!({"x": x, "y": y});
        }
    }
    for (part, f) in ["train", "test"].iter().zip(files) {
        std::fs::create_dir_all(dir.join(part)).unwrap();
        std::fs::write(
            dir.join(part).join("all_data_0.json"),
            serde_json::to_string(&f).unwrap(),
        )
        .unwrap();
    }
}

/// Both kinds of data in `dir`: `raw/100.txt` and `leaf/{train,test}/`.
pub fn data(dir: &Path) -> (String, String) {
    let (text, spoken) = complete_works(40);
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    std::fs::write(raw.join("100.txt"), text).unwrap();
    leaf(&dir.join("leaf"), &spoken, 12);
    (
        raw.join("100.txt").to_str().unwrap().to_string(),
        dir.join("leaf").to_str().unwrap().to_string(),
    )
}
