package reqdetect

// langIT is the cue table of Italian (rule 9; languages.go reads it).
var langIT = &langTable{
	code: "it", name: "Italian", presented: "allegata allegati allego", attach: "allegato",
	delivery:  "allega* esporta* salvalo salvala salvare carica* consegna* scaricabile allegala allegalo",
	send:      "invia* condividi* manda* rimanda*",
	output:    "creare crealo creala scrivi scrivere redigi produci prepara fai",
	transform: "converti convertire trasforma* traduci",
	input:     "leggi leggere riassumi riassumere analizza* confronta* rivedi esamina* utilizza* apri controlla* verifica* esegui* lancia*",
	reply:     "rispondi rispondere spiega* dimmi", inline: "chat chat- qui risposta",
	negators: "non> nessun nessuna nessuno senza> mai niente", fileWords: "file",
	model: "modello esempio basato basata basandoti stesso stessa stile seguendo", modelNouns: "modello esempio",
	destPreps: "come", namingPreps: "come", sourcePreps: "da dal dalla dai",
	productNouns: "pulsante strumento funzione programma servizio opzione funzionalità",
	featureVerbs: "aggiungi* implementa", whWords: "chi che perché quale come dove",
	perfect:      "ho hai abbiamo hanno già",
	function:     "un una il gli di della questo questa che nel nella lo non sono è anche dei delle degli alla sul sulla ci",
	deliverables: "consegne consegna file_di_output risultati_attesi da_consegnare",
	inputs:       "file_di_input contesto riferimenti fonti allegati premessa situazione dati_di_input materiali",
	edit:         "aggiorna* correggi* correzion* correggere modifica* sistema* aggiusta* ritocca* adatta*",
	naming:       "chiama* chiamala chiamalo nomina* intitola*", polite: "per_favore grazie", repo: "ramo test",
	bug: "errore", nounMarks: "di del della dei delle degli", pointers: "questo questa", clitics: "lo la",
	other:  "altr* aggiuntiv*",
	toward: "al alla",
}
